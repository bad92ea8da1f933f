/* Internal: equality of two NUL-terminated strings. The runtime compares only short names
 * (operators, overloads, backend ids, methods); the C library's strcmp is tuned for long
 * strings and is 442 B of newlib-nano .text, more than the rest of the image's libc. */
#ifndef TM_STR_EQUAL_H
#define TM_STR_EQUAL_H

#include <stdbool.h>

static inline bool tm_str_equal(const char *a, const char *b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

#endif

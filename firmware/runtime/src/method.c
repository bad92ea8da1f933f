/*
 * Method preparation in caller memory (no heap) and the executor.
 *
 * tm_method_required_memory runs the plan walker in counting mode; tm_method_init
 * carves the metadata buffer into the value table, tensors, int lists, tensor
 * list items, kernel table, instructions and argument pointers, then runs the walker
 * again to fill them. Planned tensors point into the arena, constants into the .pte itself.
 */
#include <string.h>

#include "loader.h"

#define META_ALIGN 8u
#define ARENA_ALIGN 16u

/* Regions of the metadata buffer, in order. */
enum { M_VALUES, M_TENSORS, M_INSTRS, M_ARGV, M_INTS, M_LISTS, M_OPS, M_IO, M_DELEGATES, M_VERIFIED, M_TOTAL };
typedef size_t meta_layout[M_TOTAL + 1];

static size_t align_up(size_t n, size_t a) { return (n + a - 1u) & ~(a - 1u); }

/* Offsets of each region in the metadata buffer (sizes are bounded by the file size). */
static void layout(const tm_walk *w, meta_layout m) {
  const size_t bytes[M_TOTAL] = {
      (size_t)w->num_values * sizeof(tm_value),
      (size_t)w->num_tensors * sizeof(tm_tensor),
      (size_t)w->num_instrs * sizeof(tm_instruction),
      (size_t)w->num_args * sizeof(tm_value *),
      (size_t)w->num_ints * sizeof(int64_t),
      (size_t)w->num_list_items * sizeof(tm_value *),
      (size_t)w->num_ops * sizeof(const tm_kernel_entry *),
      ((size_t)w->num_inputs + w->num_outputs) * sizeof(uint32_t),
      (size_t)w->num_delegates * sizeof(tm_delegate_slot), /* backend + its state per delegate */
      ((size_t)w->num_instrs + 7u) / 8u, /* one bit per instruction: arguments already accepted */
  };
  size_t at = 0;
  for (unsigned k = 0; k < M_TOTAL; ++k) {
    m[k] = at;
    at = align_up(at + bytes[k], META_ALIGN);
  }
  m[M_TOTAL] = at;
}

static tm_status count(tm_program *program, const char *name, tm_fb_table *plan, tm_walk *w) {
  if (program == NULL || program->root == 0) {
    return TM_ERR_INVALID_STATE;
  }
  tm_status st = tm_find_plan(program, name, plan);
  if (st != TM_OK) {
    return st;
  }
  memset(w, 0, sizeof(*w));
  return tm_walk_plan(program, &program->diag, plan, w);
}

tm_status tm_method_required_memory(tm_program *program, const char *method_name, size_t *meta_bytes,
                                    size_t *arena_bytes) {
  tm_fb_table plan;
  tm_walk w;
  tm_status st = count(program, method_name, &plan, &w);
  if (st != TM_OK) {
    return st;
  }
  meta_layout m;
  layout(&w, m);
  *meta_bytes = m[M_TOTAL];
  *arena_bytes = w.arena_bytes;
  return TM_OK;
}

static tm_status fail(tm_method *m, tm_status st, const char *msg, uint32_t pos) {
  tm_diag_set(&m->diag, st, msg, pos);
  return st;
}

/* True when the tensor's bytes lie inside the arena (empty tensors write nothing; a tensor
 * without memory is reported when a kernel is called with it). */
static bool in_arena(const tm_tensor *t, const uint8_t *arena, size_t arena_bytes) {
  const uint8_t *p = t->data;
  return t->nbytes == 0 || p == NULL || (p >= arena && (size_t)(p - arena) <= arena_bytes &&
                            t->nbytes <= arena_bytes - (size_t)(p - arena));
}

/* A value run time may write: not a tensor (None, a scalar) or a tensor in planned memory. */
static bool writable(const tm_value *v, const uint8_t *arena, size_t arena_bytes) {
  return v == NULL || v->tag != TM_VALUE_TENSOR || in_arena(v->u.tensor, arena, arena_bytes);
}

/*
 * Everything written at run time must be planned memory: a kernel's out tensor (its last
 * argument) and the method inputs the caller fills. A constant there would be written
 * through into the program's bytes (flash on a device).
 */
static tm_status check_writes(tm_method *m, const tm_walk *w, const uint8_t *arena, size_t arena_bytes) {
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    const tm_instruction *ins = &w->instrs[i];
    if (ins->kind != TM_INSTR_KERNEL || ins->nargs == 0) {
      continue;
    }
    /* the returned value: one out tensor, or a multi-output op's TensorList of them */
    const tm_value *ret = ins->args[ins->nargs - 1];
    const bool list = TM_FEATURE_STRING_LIST_VALUES && ret->tag == TM_VALUE_TENSOR_LIST;
    const uint32_t count = list ? ret->u.list.length : 1u;
    for (uint32_t k = 0; k < count; ++k) {
      const tm_value *out = list ? ret->u.list.items[k] : ret;
      if (!writable(out, arena, arena_bytes)) {
        m->diag.instruction = (int32_t)i;
        m->diag.argument = (int32_t)(ins->nargs - 1u);
        m->diag.value = (int32_t)(out - w->values);
        return fail(m, TM_ERR_INVALID_PROGRAM, "kernel out tensor is not planned memory (a constant?)",
                    ins->pos);
      }
    }
  }
  for (uint32_t i = 0; i < w->num_inputs; ++i) {
    const tm_value *in = &w->values[w->io[i]];
    if (!writable(in, arena, arena_bytes)) {
      m->diag.value = (int32_t)w->io[i];
      return fail(m, TM_ERR_INVALID_PROGRAM, "method input tensor is not planned memory (a constant?)",
                  TM_DIAG_NO_OFFSET);
    }
  }
  return TM_OK;
}

/* A backend's error in the method's diagnostic: its message, the delegate id and index, the
 * byte offset in the .pte (blob offset + offset inside the blob) and the argument. */
static tm_status delegate_fail(tm_method *m, tm_status st, const tm_delegate_context *ctx,
                               const tm_delegate_slot *slot, uint32_t index, const char *fallback,
                               tm_value *const *args, size_t nargs) {
  m->diag.op_name = slot->id;
  m->diag.op_overload = NULL;
  m->diag.delegate = (int32_t)index;
  uint32_t pos = TM_DIAG_NO_OFFSET;
  if (ctx->blob_offset != TM_DIAG_NO_OFFSET && slot->blob_offset != TM_DIAG_NO_OFFSET &&
      ctx->blob_offset <= UINT32_MAX - 1u - slot->blob_offset) {
    pos = slot->blob_offset + ctx->blob_offset;
  }
  if (args != NULL && ctx->bad_argument < nargs) {
    m->diag.argument = ctx->bad_argument;
    m->diag.value = (int32_t)(args[ctx->bad_argument] - m->values);
  }
  if (st == TM_OK) {
    st = TM_ERR_DELEGATE; /* a backend that fails must say so with an error status */
  }
  return fail(m, st, ctx->message != NULL ? ctx->message : fallback, pos);
}

/* Finds each delegate's backend and lets it verify its blob into its state slot. */
static tm_status init_delegates(tm_method *m, tm_program *program, const tm_fb_table *plan,
                                const tm_kernel_registry *registry, tm_delegate_slot *slots, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    tm_delegate_slot *slot = &slots[i];
    tm_delegate_info info;
    memset(slot, 0, sizeof(*slot));
    if (tm_delegate_at(program, plan, i, &info) != TM_OK) {
      m->diag.delegate = (int32_t)i;
      return fail(m, TM_ERR_INVALID_PROGRAM, "delegate unreadable", plan->pos);
    }
    slot->id = info.id;
    slot->blob_offset = info.blob_offset;
    slot->backend = tm_registry_find_backend(registry, info.id);
    tm_delegate_context ctx = {NULL, TM_DIAG_NO_OFFSET, UINT16_MAX};
    if (slot->backend == NULL) {
      ctx.message = "delegate backend not registered in this image";
      return delegate_fail(m, TM_ERR_MISSING_OPERATOR, &ctx, slot, i, NULL, NULL, 0);
    }
    if (slot->backend->state_size > sizeof(slot->state) || slot->backend->init == NULL ||
        slot->backend->execute == NULL) {
      ctx.message = "delegate backend state larger than TM_DELEGATE_STATE_BYTES or entry point missing";
      return delegate_fail(m, TM_ERR_UNSUPPORTED, &ctx, slot, i, NULL, NULL, 0);
    }
    tm_status st = slot->backend->init(&ctx, slot->state, &info);
    if (st != TM_OK) {
      return delegate_fail(m, st, &ctx, slot, i, "delegate init failed", NULL, 0);
    }
  }
  return TM_OK;
}

/* Every DelegateCall: tensor arguments have memory, and its backend accepts the arguments. */
static tm_status prepare_delegate_calls(tm_method *m, const tm_walk *w, tm_delegate_slot *slots,
                                        const uint8_t *arena, size_t arena_bytes) {
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    const tm_instruction *ins = &w->instrs[i];
    if (ins->kind != TM_INSTR_DELEGATE) {
      continue;
    }
    tm_delegate_slot *slot = &slots[ins->a];
    tm_delegate_context ctx = {NULL, TM_DIAG_NO_OFFSET, UINT16_MAX};
    m->diag.instruction = (int32_t)i;
    for (uint32_t k = 0; k < ins->nargs; ++k) {
      const tm_value *v = ins->args[k];
      if (v->tag == TM_VALUE_TENSOR && v->u.tensor->data == NULL && v->u.tensor->numel != 0) {
        ctx.message = "delegate tensor argument has no memory (not planned, not constant)";
        ctx.bad_argument = (uint16_t)(k < UINT16_MAX ? k : UINT16_MAX);
        return delegate_fail(m, TM_ERR_INVALID_PROGRAM, &ctx, slot, (uint32_t)ins->a, NULL, ins->args,
                             ins->nargs);
      }
    }
    if (slot->backend->prepare != NULL) {
      tm_delegate_call call = {ins->args, ins->nargs, arena, arena_bytes, (uint32_t)ins->a, i};
      tm_status st = slot->backend->prepare(&ctx, slot->state, &call);
      if (st != TM_OK) {
        return delegate_fail(m, st, &ctx, slot, (uint32_t)ins->a, "delegate call arguments rejected",
                             ins->args, ins->nargs);
      }
    }
  }
  m->diag.instruction = TM_DIAG_NONE;
  return TM_OK;
}

/* A JumpFalseCall condition: a Bool value, or a Bool tensor (true when every element is). */
static bool is_condition(const tm_value *v) {
  return v->tag == TM_VALUE_BOOL ||
         (v->tag == TM_VALUE_TENSOR && v->u.tensor->scalar_type == TM_BOOL && v->u.tensor->numel != 0 &&
          v->u.tensor->data != NULL);
}

/* Two tensors a MoveCall may rebind between: planned memory, same type and sizes. */
static bool movable_tensors(const tm_tensor *a, const tm_tensor *b, const uint8_t *arena, size_t arena_bytes) {
  if (a->scalar_type != b->scalar_type || a->dim != b->dim || a->nbytes != b->nbytes || a->data == NULL ||
      b->data == NULL || !in_arena(a, arena, arena_bytes) || !in_arena(b, arena, arena_bytes)) {
    return false;
  }
  for (uint32_t k = 0; k < a->dim; ++k) {
    if (a->sizes[k] != b->sizes[k] || a->dim_order[k] != b->dim_order[k]) {
      return false;
    }
  }
  return true;
}

/* Internal instruction kind: a loop kernel of torch.map (see classify_loop_ops). */
enum { TM_INSTR_LOOP = 16 };

/* Operator op_index of the plan at plan_pos (strings in the verified program). */
static bool op_name(const tm_program *program, uint32_t plan_pos, int32_t op_index, const char **name,
                    uint32_t *name_len, const char **overload, uint32_t *overload_len) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table plan, op;
  tm_fb_vec ops;
  return tm_fb_table_at(&fb, plan_pos, &plan) && tm_fb_vector(&fb, &plan, 6 /* operators */, 4, &ops) &&
         tm_fb_vec_table(&fb, &ops, (uint32_t)op_index, &op) && tm_fb_string(&fb, &op, 0, name, name_len) &&
         tm_fb_string(&fb, &op, 1, overload, overload_len);
}

static bool same_text(const char *s, uint32_t len, const char *literal) {
  return strlen(literal) == len && memcmp(s, literal, len) == 0;
}

/* The loop kernels ExecuTorch's emitter uses for torch.map (the registry's ops with a loop call,
 * generated into control_ops.inc, which also names TM_LOOP_BOOL_OP). They change Int/Bool values
 * (an index, a count, the loop condition: LOOP_SCALAR; a Bool for TM_LOOP_BOOL_OP) or write a
 * tensor slot at a changing index (LOOP_COPY_INDEX), so they run with every argument checked on
 * every call. */
typedef enum { LOOP_SCALAR, LOOP_SELECT, LOOP_COPY_INDEX } loop_role;
static const struct {
  const char *name, *overload;
  loop_role role;
} LOOP_OPS[] = {
#include "control_ops.inc"
};

/* A loop kernel that writes a scalar value (its last argument). */
static bool writes_scalar(const tm_instruction *ins) {
  return ins->kind == TM_INSTR_LOOP && ins->nargs == 3u && ins->args[2]->tag != TM_VALUE_TENSOR;
}

/* Some instruction other than a kernel can change the value: a MoveCall or a loop kernel. */
static bool changing_value(const tm_walk *w, uint32_t value) {
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    const tm_instruction *ins = &w->instrs[i];
    if ((ins->kind == TM_INSTR_MOVE && (uint32_t)ins->b == value) ||
        (writes_scalar(ins) && ins->args[2] == &w->values[value])) {
      return true;
    }
  }
  return false;
}

/*
 * Marks the loop kernels (TM_INSTR_LOOP) and checks them: a scalar result is an Int (a Bool for
 * eq) that only loop kernels and jump conditions read - a kernel that skips its checks once
 * verified never sees it change; et_copy_index writes a planned tensor.
 */
static tm_status classify_loop_ops(tm_method *m, const tm_program *program, uint32_t plan_pos, tm_walk *w,
                                   const uint8_t *arena, size_t arena_bytes) {
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    tm_instruction *ins = &w->instrs[i];
    const char *name, *overload;
    uint32_t nlen, olen;
    if (ins->kind != TM_INSTR_KERNEL || !op_name(program, plan_pos, ins->a, &name, &nlen, &overload, &olen)) {
      continue;
    }
    for (size_t k = 0; k < sizeof(LOOP_OPS) / sizeof(LOOP_OPS[0]); ++k) {
      if (!same_text(name, nlen, LOOP_OPS[k].name) || !same_text(overload, olen, LOOP_OPS[k].overload)) {
        continue;
      }
      m->diag.instruction = (int32_t)i;
      bool ok = LOOP_OPS[k].role == LOOP_SELECT || ins->nargs == 3u;
      if (ok && LOOP_OPS[k].role == LOOP_SCALAR) {
        const uint8_t want = same_text(name, nlen, TM_LOOP_BOOL_OP) ? TM_VALUE_BOOL : TM_VALUE_INT;
        ok = ins->args[2]->tag == want;
      } else if (ok && LOOP_OPS[k].role == LOOP_COPY_INDEX) {
        ok = ins->args[0]->tag == TM_VALUE_TENSOR && ins->args[0]->u.tensor->data != NULL &&
             in_arena(ins->args[0]->u.tensor, arena, arena_bytes);
      }
      if (!ok) {
        return fail(m, TM_ERR_INVALID_PROGRAM, "loop kernel result is not a planned tensor or a scalar of its type",
                    ins->pos);
      }
      ins->kind = TM_INSTR_LOOP;
    }
  }
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    if (!writes_scalar(&w->instrs[i])) {
      continue;
    }
    const tm_value *v = w->instrs[i].args[2];
    for (uint32_t j = 0; j < w->num_instrs; ++j) {
      const tm_instruction *use = &w->instrs[j];
      bool bad = use->kind == TM_INSTR_MOVE && (&w->values[use->a] == v || &w->values[use->b] == v);
      for (uint32_t k = 0; use->kind != TM_INSTR_LOOP && k < use->nargs && !bad; ++k) {
        bad = use->args[k] == v;
      }
      if (bad) {
        m->diag.instruction = (int32_t)j;
        m->diag.value = (int32_t)(v - w->values);
        return fail(m, TM_ERR_INVALID_PROGRAM, "a loop counter or condition is used outside the loop kernels",
                    use->pos);
      }
    }
  }
  m->diag.instruction = TM_DIAG_NONE;
  return TM_OK;
}

/*
 * Control flow at load: a JumpFalseCall reads a condition (its destination was bounds-checked
 * by the walk); a MoveCall rebinds a value of the same kind - scalars to scalars, a tensor to
 * a planned tensor of the same type, sizes and layout, so a later kernel's out argument can
 * never become a constant and no kernel sees a shape it was not loaded with.
 */
static tm_status check_control_flow(tm_method *m, const tm_walk *w, const uint8_t *arena, size_t arena_bytes) {
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    const tm_instruction *ins = &w->instrs[i];
    m->diag.instruction = (int32_t)i;
    if (ins->kind == TM_INSTR_JUMP_FALSE && !is_condition(&w->values[ins->a])) {
      m->diag.value = ins->a;
      return fail(m, TM_ERR_INVALID_PROGRAM, "jump condition is not a Bool or a Bool tensor", ins->pos);
    }
    /* A backward jump closes a loop: its condition must be a Bool a loop kernel or MoveCall
     * changes (a constant false one never ends; a tensor one is not a form we emit). */
    if (ins->kind == TM_INSTR_JUMP_FALSE && (uint32_t)ins->b <= i &&
        (w->values[ins->a].tag != TM_VALUE_BOOL || !changing_value(w, (uint32_t)ins->a))) {
      m->diag.value = ins->a;
      return fail(m, TM_ERR_INVALID_PROGRAM, "backward jump on a condition no loop changes (endless loop)",
                  ins->pos);
    }
    if (ins->kind != TM_INSTR_MOVE) {
      continue;
    }
    const tm_value *from = &w->values[ins->a], *to = &w->values[ins->b];
    bool ok = from->tag == to->tag;
    if (ok && from->tag == TM_VALUE_TENSOR) {
      ok = movable_tensors(from->u.tensor, to->u.tensor, arena, arena_bytes);
    } else if (ok) {
      ok = from->tag == TM_VALUE_INT || from->tag == TM_VALUE_BOOL || from->tag == TM_VALUE_DOUBLE ||
           from->tag == TM_VALUE_NONE;
    }
    if (!ok) {
      m->diag.value = ins->b;
      return fail(m, TM_ERR_INVALID_PROGRAM,
                  "move between values of different kinds (or tensors of different type, sizes or memory)",
                  ins->pos);
    }
  }
  m->diag.instruction = TM_DIAG_NONE;
  return TM_OK;
}

/* A call's returned value: an out tensor, or (multi-output op) a TensorList of out tensors. */
static bool returns_tensors(const tm_value *ret) {
  if (ret->tag == TM_VALUE_TENSOR) {
    return true;
  }
  if (!TM_FEATURE_STRING_LIST_VALUES || ret->tag != TM_VALUE_TENSOR_LIST || ret->u.list.length == 0) {
    return false;
  }
  for (uint32_t k = 0; k < ret->u.list.length; ++k) {
    const tm_value *v = ret->u.list.items[k];
    if (v == NULL || v->tag != TM_VALUE_TENSOR) {
      return false;
    }
  }
  return true;
}

/* What is wrong with a kernel call in general, whatever its kernel: NULL when it ends with an
 * out tensor (or a TensorList of them) and its tensors have memory; else the problem, with the
 * argument at fault in *arg (-1: the call as a whole). */
static const char *call_problem(const tm_instruction *ins, int32_t *arg) {
  *arg = -1;
  if (ins->nargs == 0 || !returns_tensors(ins->args[ins->nargs - 1])) {
    return "kernel call does not end with an out tensor";
  }
  for (uint32_t k = 0; k < ins->nargs; ++k) {
    const tm_value *v = ins->args[k];
    if (v->tag == TM_VALUE_TENSOR && v->u.tensor->data == NULL && v->u.tensor->numel != 0) {
      *arg = (int32_t)k;
      return "tensor argument has no memory (not planned, not constant)";
    }
  }
  return NULL;
}

/*
 * Each KernelCall once, at init: when the call passes the generic checks and its kernel has a
 * prepare step that accepts the arguments, the instruction starts verified, so its first call
 * costs what every later one does; the shared scratch must hold what the prepare steps ask for
 * (scratch_needed). A call that fails here is left unverified: its first execution reports
 * the problem, as without a prepare step.
 */
static void prepare_kernel_calls(tm_method *m, const tm_walk *w, uint8_t *verified) {
  uint32_t needed = 0;
  for (uint32_t i = 0; i < w->num_instrs; ++i) {
    const tm_instruction *ins = &w->instrs[i];
    int32_t arg;
    if (ins->kind != TM_INSTR_KERNEL || w->ops[ins->a]->prepare == NULL || call_problem(ins, &arg) != NULL) {
      continue;
    }
    tm_kernel_context ctx = {UINT16_MAX, 0, 1, 0, NULL};
    if (w->ops[ins->a]->prepare(&ctx, ins->args, ins->nargs) == TM_OK) {
      needed = ctx.scratch_bytes > needed ? ctx.scratch_bytes : needed;
      verified[i >> 3] |= (uint8_t)(1u << (i & 7u));
    }
  }
  m->scratch_needed = needed;
}

tm_status tm_method_init(tm_method *method, tm_program *program, const char *method_name,
                         const tm_kernel_registry *registry, void *meta, size_t meta_size, void *arena,
                         size_t arena_size) {
  if (method == NULL) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  memset(method, 0, sizeof(*method));
  tm_diag_clear(&method->diag);
  tm_fb_table plan;
  tm_walk w;
  tm_status st = count(program, method_name, &plan, &w);
  if (st != TM_OK) {
    if (st == TM_ERR_INVALID_STATE) {
      return fail(method, st, "program not loaded", TM_DIAG_NO_OFFSET);
    }
    method->diag = program->diag;
    return st;
  }
  if (w.num_chains > 1) {
    return fail(method, TM_ERR_UNSUPPORTED, "more than one chain", plan.pos);
  }
  meta_layout m;
  layout(&w, m);
  if (registry == NULL || (meta == NULL && m[M_TOTAL] != 0) || ((uintptr_t)meta & (META_ALIGN - 1u)) != 0 ||
      (arena == NULL && w.arena_bytes != 0) || ((uintptr_t)arena & (ARENA_ALIGN - 1u)) != 0) {
    return fail(method, TM_ERR_INVALID_ARGUMENT, "missing registry or buffer, or buffer misaligned",
                TM_DIAG_NO_OFFSET);
  }
  if (meta_size < m[M_TOTAL]) {
    return fail(method, TM_ERR_OUT_OF_MEMORY, "metadata buffer too small", TM_DIAG_NO_OFFSET);
  }
  if (arena_size < w.arena_bytes) {
    return fail(method, TM_ERR_OUT_OF_MEMORY, "arena too small for the planned tensors", TM_DIAG_NO_OFFSET);
  }
  uint8_t *base = meta;
  tm_walk fill;
  memset(&fill, 0, sizeof(fill));
  fill.values = (tm_value *)(void *)(base + m[M_VALUES]);
  fill.tensors = (tm_tensor *)(void *)(base + m[M_TENSORS]);
  fill.instrs = (tm_instruction *)(void *)(base + m[M_INSTRS]);
  fill.argv = (tm_value **)(void *)(base + m[M_ARGV]);
  fill.ints = (int64_t *)(void *)(base + m[M_INTS]);
  fill.list_items = (const tm_value **)(void *)(base + m[M_LISTS]);
  fill.ops = (const tm_kernel_entry **)(void *)(base + m[M_OPS]);
  fill.io = (uint32_t *)(void *)(base + m[M_IO]);
  fill.arena = arena;
  fill.registry = registry;
  st = tm_walk_plan(program, &method->diag, &plan, &fill);
  if (st != TM_OK) {
    return st;
  }
  if ((st = check_writes(method, &fill, arena, w.arena_bytes)) != TM_OK) {
    return st;
  }
  /* Without the feature (loader.h) the walk refused every move, jump and delegate. */
  if (TM_FEATURE_CONTROL_FLOW &&
      ((st = classify_loop_ops(method, program, plan.pos, &fill, arena, w.arena_bytes)) != TM_OK ||
       (st = check_control_flow(method, &fill, arena, w.arena_bytes)) != TM_OK)) {
    return st;
  }
  tm_delegate_slot *slots = (tm_delegate_slot *)(void *)(base + m[M_DELEGATES]);
  if (TM_FEATURE_DELEGATES &&
      ((st = init_delegates(method, program, &plan, registry, slots, w.num_delegates)) != TM_OK ||
       (st = prepare_delegate_calls(method, &fill, slots, arena, w.arena_bytes)) != TM_OK)) {
    return st;
  }
  uint8_t *verified = base + m[M_VERIFIED];
  if (m[M_TOTAL] > m[M_VERIFIED]) {
    memset(verified, 0, m[M_TOTAL] - m[M_VERIFIED]); /* no call has succeeded yet */
  }
  prepare_kernel_calls(method, &fill, verified);
  const size_t planned = align_up(w.arena_bytes, ARENA_ALIGN);
  if (arena_size > planned) {
    const size_t spare = arena_size - planned;
    method->scratch = (uint8_t *)arena + planned;
    method->scratch_bytes = spare > UINT32_MAX ? UINT32_MAX : (uint32_t)spare;
  }
  method->program = program;
  method->plan = plan.pos;
  method->values = fill.values;
  method->num_values = fill.num_values;
  method->tensors = fill.tensors;
  method->num_tensors = fill.num_tensors;
  method->instructions = fill.instrs;
  method->num_instructions = fill.num_instrs;
  method->inputs = fill.io;
  method->num_inputs = fill.num_inputs;
  method->outputs = fill.io + fill.num_inputs;
  method->num_outputs = fill.num_outputs;
  method->verified = verified;
  method->delegates = slots;
  method->num_delegates = w.num_delegates;
  method->ready = 1;
  return TM_OK;
}

static tm_tensor *tensor_at(tm_method *m, uint32_t value) {
  tm_value *v = &m->values[value];
  return v->tag == TM_VALUE_TENSOR ? v->u.tensor : NULL;
}

tm_tensor *tm_method_input(tm_method *method, uint32_t index) {
  if (method == NULL || !method->ready || index >= method->num_inputs) {
    return NULL;
  }
  return tensor_at(method, method->inputs[index]);
}

tm_tensor *tm_method_output(tm_method *method, uint32_t index) {
  if (method == NULL || !method->ready || index >= method->num_outputs) {
    return NULL;
  }
  return tensor_at(method, method->outputs[index]);
}

/* Names the operator of a failing kernel call (cold path: re-reads the verified program). */
static void name_operator(tm_method *m, int32_t op_index) {
  uint32_t len;
  const char *name, *overload;
  if (op_name(m->program, m->plan, op_index, &name, &len, &overload, &len)) {
    m->diag.op_name = name;
    m->diag.op_overload = overload;
  }
}

/* The generic checks before an unverified kernel call runs (call_problem), reported.
 * Out of line: it runs on an instruction's first call only, and inlined its loop would cost
 * the executor loop registers on every call. */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static tm_status check_call(tm_method *m, const tm_instruction *ins) {
  int32_t k;
  const char *problem = call_problem(ins, &k);
  if (problem == NULL) {
    return TM_OK;
  }
  if (k >= 0) {
    m->diag.argument = k;
    m->diag.value = (int32_t)(ins->args[k] - m->values);
  }
  return fail(m, TM_ERR_INVALID_PROGRAM, problem, ins->pos);
}

#if defined(TORCHMCU_PROFILE)
/*
 * Per-kernel profiling hook, compiled in only with TORCHMCU_PROFILE (CMake option of the same
 * name): the executor calls tm_profile_instruction(pc) as each kernel instruction starts
 * (before its argument checks) and once more, with pc == the method's instruction count,
 * after the last instruction. On QEMU the
 * instruction-count plugin ticks on this function's address (torchmcu.device.icount.
 * profile_instructions), so each kernel call, with its share of the executor loop, is one
 * occurrence. The definition is weak so a runner can provide a strong one that reads a cycle
 * counter instead (PMU/DWT on an FVP or hardware); it must stay a real, separate call.
 */
void tm_profile_instruction(uint32_t instruction);

#if defined(__GNUC__) && !defined(__clang__)
#define TM_PROFILE_HOOK __attribute__((weak, noinline, noipa, used))
#else
#define TM_PROFILE_HOOK __attribute__((weak, noinline, used))
#endif

TM_PROFILE_HOOK void tm_profile_instruction(uint32_t instruction) {
  __asm__ volatile("" : : "r"(instruction) : "memory");
}
#define TM_PROFILE_MARK(pc) tm_profile_instruction(pc)
#else
#define TM_PROFILE_MARK(pc) ((void)0)
#endif

/* A kernel call returned st: the diagnostic names the operator and the argument (value
 * index) the kernel reported. */
static tm_status kernel_failed(tm_method *method, const tm_instruction *ins, const tm_kernel_context *ctx,
                               tm_status st) {
  name_operator(method, ins->a);
  if (ctx->bad_argument < ins->nargs) {
    method->diag.argument = ctx->bad_argument;
    method->diag.value = (int32_t)(ins->args[ctx->bad_argument] - method->values);
  }
  return fail(method, st, "kernel failed", ins->pos);
}

void tm_method_recheck_arguments(tm_method *method) {
  if (method->verified != NULL) {
    memset(method->verified, 0, ((size_t)method->num_instructions + 7u) / 8u);
  }
}

tm_status tm_method_execute(tm_method *method) {
  if (method == NULL || !method->ready) {
    return TM_ERR_INVALID_STATE;
  }
  tm_diag *d = &method->diag;
  uint32_t pc = 0;
  while (pc < method->num_instructions) {
    const tm_instruction *ins = &method->instructions[pc];
    tm_status st;
    d->instruction = (int32_t)pc;
    switch (ins->kind) {
      case TM_INSTR_KERNEL: {
        TM_PROFILE_MARK(pc); /* this call's count runs to the next mark: checks, kernel, frees */
        /* The bit: the kernel accepted these arguments before (its prepare step at init or an
         * earlier call); check_call looks at argument metadata only, so it passes again. */
        const uint8_t verified = (uint8_t)((method->verified[pc >> 3] >> (pc & 7u)) & 1u);
        if (!verified && (st = check_call(method, ins)) != TM_OK) {
          name_operator(method, ins->a);
          return st;
        }
        tm_kernel_context ctx = {UINT16_MAX, verified, 0, method->scratch_bytes, method->scratch};
        st = ins->fn(&ctx, ins->args, ins->nargs);
        if (st != TM_OK) {
          return kernel_failed(method, ins, &ctx, st);
        }
        /* Same argument values next time: the kernel may skip its checks. */
        method->verified[pc >> 3] |= (uint8_t)(1u << (pc & 7u));
        ++pc;
        break;
      }
#if TM_FEATURE_CONTROL_FLOW
      case TM_INSTR_LOOP: { /* a loop kernel: its index/count change, checked on every call */
        TM_PROFILE_MARK(pc);
        tm_kernel_context ctx = {UINT16_MAX, 0, 0, method->scratch_bytes, method->scratch};
        st = ins->fn(&ctx, ins->args, ins->nargs);
        if (st != TM_OK) {
          return kernel_failed(method, ins, &ctx, st);
        }
        ++pc;
        break;
      }
#endif
      case TM_INSTR_FREE: /* memory is planned ahead: nothing to release */
        ++pc;
        break;
#if TM_FEATURE_DELEGATES
      case TM_INSTR_DELEGATE: {
        TM_PROFILE_MARK(pc);
        tm_delegate_slot *slot = &method->delegates[ins->a];
        tm_delegate_context ctx = {NULL, TM_DIAG_NO_OFFSET, UINT16_MAX};
        const tm_delegate_call call = {ins->args, ins->nargs, NULL, 0, (uint32_t)ins->a, pc};
        st = slot->backend->execute(&ctx, slot->state, &call);
        if (st != TM_OK) {
          return delegate_fail(method, st, &ctx, slot, (uint32_t)ins->a, "delegate failed", ins->args,
                               ins->nargs);
        }
        ++pc;
        break;
      }
#endif
#if TM_FEATURE_CONTROL_FLOW
      case TM_INSTR_JUMP_FALSE: { /* condition kind and destination verified at load */
        const tm_value *c = &method->values[ins->a];
        bool taken = true;
        if (c->tag == TM_VALUE_BOOL) {
          taken = c->u.b;
        } else {
          const uint8_t *flags = (const uint8_t *)c->u.tensor->data;
          for (uint32_t k = 0; k < c->u.tensor->numel && taken; ++k) {
            taken = flags[k] != 0u;
          }
        }
        pc = taken ? pc + 1u : (uint32_t)ins->b;
        break;
      }
      case TM_INSTR_MOVE:
        /* ExecuTorch's semantics: the destination value becomes the source (a tensor value is
         * rebound, not copied; same kind, type and sizes checked at load). Later calls see a
         * different argument value: every kernel checks its arguments again. */
        method->values[ins->b] = method->values[ins->a];
        tm_method_recheck_arguments(method);
        ++pc;
        break;
#endif
      default: /* also a feature this image was built without (refused at load) */
        return fail(method, TM_ERR_UNSUPPORTED, "instruction kind not supported by this runtime", ins->pos);
    }
  }
  TM_PROFILE_MARK(pc);
  d->instruction = TM_DIAG_NONE;
  return TM_OK;
}

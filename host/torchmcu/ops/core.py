"""The types of the operator registry: a parsed schema, the C kernel, the NPU side, one operator
definition, the quantizer patterns, and the registry that holds them.

Torch-free on purpose (the bottom layer: tests/test_import_graph.py). The stage hooks an OpDef
or Pattern carries (reference, check, lowering rules, TOSA lowering) get their stage's toolkit
as an argument, so nothing here imports a stage.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Sequence

FAMILIES = ("int8", "portable", "control")
# How a KernelCall passes the arguments (firmware/runtime/src/method.c runs the loop roles):
# "out": the schema arguments, then the out tensor again (the returned value);
# "multi_out": the schema arguments, then one TensorList of the outs;
# "loop_*": the schema arguments, then the returned scalar if the schema returns one.
CALLS = ("out", "multi_out", "loop_scalar", "loop_select", "loop_copy_index")
ANNOTATE_KINDS = (
    "weighted", "binary", "anchor", "mean", "shared", "softmax", "masked_softmax", "table",
    "activation", "cat", "embedding",
)


class SchemaError(ValueError):
    """A schema string outside the grammar this parser takes."""


class RegistryError(ValueError):
    """A definition the registry refuses: a duplicate key or inconsistent fields."""


class ArgError(ValueError):
    """A KernelCall argument its operator's check refuses, named as TM_ARG_CHECK names it: the
    schema position (the C kernel's ctx->bad_argument) and the argument's name."""

    def __init__(self, index: int, name: str, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return f"argument {self.index} ({self.name}): {self.message}"


_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# <type>[(alias[!])][[N]][?] [<name>[=<default>]]: the name is optional for returned items
_ARG = re.compile(
    rf"(?P<base>{_IDENT})(?:\((?P<alias>[a-z]+)(?P<mutable>!)?\))?"
    r"(?P<list>\[\d*\])?(?P<optional>\?)?"
    rf"(?:\s+(?P<name>{_IDENT})(?:\s*=\s*(?P<default>.+))?)?"
)
_HEAD = re.compile(rf"(?P<ns>{_IDENT})::(?P<name>{_IDENT})(?:\.(?P<overload>{_IDENT}))?")


@dataclass(frozen=True)
class Arg:
    """One schema argument (or returned item: `name` may then be empty)."""

    name: str
    type: str  # without the alias: "Tensor", "Tensor?", "Tensor[]", "int[]?", "int[1]?", "SymInt"
    index: int
    kw_only: bool = False
    alias: str | None = None  # "a" of Tensor(a!) / Tensor(a)
    mutable: bool = False  # the "!" of Tensor(a!): the kernel writes it
    default: str | None = None  # as written: "1", "False", "None", '"none"'

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def base(self) -> str:
        """The element type: "int" for "int[1]?"."""
        return re.match(_IDENT, self.type).group(0)  # type: ignore[union-attr]

    @property
    def is_list(self) -> bool:
        return "[" in self.type

    def type_text(self) -> str:
        """The type as the schema writes it, alias included: "Tensor(a!)", "Tensor(a)[]"."""
        if self.alias is None:
            return self.type
        base = self.base
        marker = f"({self.alias}{'!' if self.mutable else ''})"
        return base + marker + self.type[len(base) :]

    def __str__(self) -> str:
        text = self.type_text()
        if self.name:
            text += f" {self.name}"
        if self.default is not None:
            text += f"={self.default}"
        return text


def _split_top(text: str) -> list[str]:
    """`text` split at the commas outside brackets, parentheses and string literals."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth < 0:
                raise SchemaError(f"unbalanced {ch!r} in {text!r}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if depth or quote:
        raise SchemaError(f"unbalanced brackets or quotes in {text!r}")
    tail = text[start:].strip()
    if tail or parts:
        parts.append(tail)
    return parts


def _parse_arg(text: str, index: int, kw_only: bool, *, returned: bool = False) -> Arg:
    m = _ARG.fullmatch(text)
    if m is None or (not returned and not m["name"]) or (returned and m["default"]):
        raise SchemaError(f"cannot parse {'returned item' if returned else 'argument'} {text!r}")
    kind = m["base"] + (m["list"] or "") + (m["optional"] or "")
    return Arg(
        m["name"] or "",
        kind,
        index,
        kw_only,
        m["alias"],
        bool(m["mutable"]),
        m["default"].strip() if m["default"] else None,
    )


class Positions:
    """Argument positions by name, read-only: `schema.A.stride == 3`."""

    __slots__ = ("_of", "_where")

    def __init__(self, of: Mapping[str, int], where: str) -> None:
        object.__setattr__(self, "_of", dict(of))
        object.__setattr__(self, "_where", where)

    def __reduce__(self) -> tuple[Any, ...]:  # copy and pickle go through __init__
        return (Positions, (self._of, self._where))

    def __getattr__(self, name: str) -> int:
        if name.startswith("__") or name in Positions.__slots__:
            raise AttributeError(name)  # copy/pickle probing an unset instance
        try:
            return self._of[name]
        except KeyError:
            raise AttributeError(f"{self._where} has no argument {name!r}") from None

    def __getitem__(self, name: str) -> int:
        return self.__getattr__(name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("argument positions are read-only")

    def __contains__(self, name: object) -> bool:
        return name in self._of

    def __iter__(self) -> Iterator[str]:
        return iter(self._of)


@dataclass(frozen=True)
class Schema:
    """An ExecuTorch (= ATen) operator schema: `ns::name.overload(args) -> returns`."""

    namespace: str
    name: str
    overload: str  # "" for the default overload
    args: tuple[Arg, ...]
    returns: tuple[Arg, ...]
    A: Positions = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = [a.name for a in self.args]
        if len(set(names)) != len(names):
            raise SchemaError(f"{self.key}: repeated argument names {names}")
        if [a.index for a in self.args] != list(range(len(self.args))):
            raise SchemaError(f"{self.key}: argument indices are not 0..n-1")
        kw = [a.kw_only for a in self.args]
        if kw != sorted(kw):
            raise SchemaError(f"{self.key}: a positional argument after the keyword-only ones")
        object.__setattr__(self, "A", Positions({a.name: a.index for a in self.args}, self.key))

    @classmethod
    def parse(cls, text: str) -> Schema:
        text = text.strip()
        head, paren, rest = text.partition("(")
        m = _HEAD.fullmatch(head.strip())
        if not paren or m is None:
            raise SchemaError(f"expected 'ns::name.overload(args) -> returns', got {text!r}")
        depth, close = 1, -1
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                close = i
                break
        if close < 0:
            raise SchemaError(f"unclosed argument list in {text!r}")
        arrow = rest[close + 1 :].strip()
        if not arrow.startswith("->"):
            raise SchemaError(f"missing '-> returns' in {text!r}")
        args = _parse_args(rest[:close])
        return cls(m["ns"], m["name"], m["overload"] or "", args, _parse_returns(arrow[2:].strip()))

    # -- names
    @property
    def qualified(self) -> str:
        """The operator name of a .pte: "cortex_m::quantized_conv2d"."""
        return f"{self.namespace}::{self.name}"

    @property
    def key(self) -> str:
        """The registry key, as kernels.json and yaml write it: "cortex_m::quantized_conv2d.out"."""
        return f"{self.qualified}.{self.overload}" if self.overload else self.qualified

    # -- arguments
    @property
    def outs(self) -> tuple[Arg, ...]:
        """The arguments the kernel writes (Tensor(a!) ...)."""
        return tuple(a for a in self.args if a.mutable)

    @property
    def n_call_args(self) -> int:
        """Values a KernelCall passes: the arguments, then one returned value if any (the out
        tensor again, a TensorList of the outs, or a scalar)."""
        return len(self.args) + (1 if self.returns else 0)

    @property
    def signature(self) -> str:
        """The argument list as docs/operators.md writes it: "(Tensor self, *, Tensor(a!) out)"."""
        parts: list[str] = []
        for a in self.args:
            if a.kw_only and (not parts or not self.args[a.index - 1].kw_only):
                parts.append("*")
            parts.append(str(a))
        return "(" + ", ".join(parts) + ")"

    def returns_text(self) -> str:
        if len(self.returns) == 1:
            return str(self.returns[0])
        return "(" + ", ".join(str(r) for r in self.returns) + ")"

    def __str__(self) -> str:
        return f"{self.key}{self.signature} -> {self.returns_text()}"

    def renamed(self, name: str) -> Schema:
        """The same arguments under another operator name (the _nhwc aliases)."""
        return Schema(self.namespace, name, self.overload, self.args, self.returns)


def _parse_args(text: str) -> tuple[Arg, ...]:
    args: list[Arg] = []
    kw_only = False
    for part in _split_top(text):
        if part == "*":
            if kw_only:
                raise SchemaError(f"two '*' in ({text})")
            kw_only = True
            continue
        args.append(_parse_arg(part, len(args), kw_only))
    if kw_only and not any(a.kw_only for a in args):
        raise SchemaError(f"'*' with no keyword-only argument after it in ({text})")
    return tuple(args)


def _parse_returns(text: str) -> tuple[Arg, ...]:
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
        items = _split_top(text)
    else:
        items = [text]
    if any(not item for item in items) and items != [""]:
        raise SchemaError(f"empty returned item in {text!r}")
    return tuple(_parse_arg(item, k, False, returned=True) for k, item in enumerate(items) if item)


@dataclass(frozen=True)
class Kernel:
    """The C side of an operator: its entry point and the translation unit holding it
    (relative to firmware/kernels/)."""

    symbol: str  # "tm_torchmcu_slice_copy_out"
    source: str  # "cortex_m/slice_copy.c"
    scratch_c: str | None = None  # "tm_quantized_conv2d_scratch_bytes"
    # The kernel has a prepare step (tm_kernel_entry.prepare), `prepare_symbol` beside its entry
    # point: tm_method_init runs it once per call (argument checks, the shared scratch it needs),
    # so the first execution costs what later ones do.
    prepare: bool = False

    @property
    def prepare_symbol(self) -> str | None:
        """tm_<ns>_<op>_prepare beside the entry point tm_<ns>_<op>_out; None without one."""
        return self.symbol.removesuffix("_out") + "_prepare" if self.prepare else None

    @classmethod
    def by_name(cls, schema: Schema, scratch_c: str | None = None, prepare: bool = False) -> Kernel:
        """The naming rule a kernel follows unless its definition says otherwise: cortex_m::foo
        and torchmcu::foo are tm_<ns>_foo_out in cortex_m/foo.c; any other namespace's foo is
        an ExecuTorch portable operator, tm_portable_foo_out in portable/foo.c (a leading
        underscore dropped: aten::_softmax is softmax.c)."""
        base = schema.name.lstrip("_")
        if schema.namespace in ("cortex_m", "torchmcu"):
            return cls(
                f"tm_{schema.namespace}_{base}_out", f"cortex_m/{base}.c", scratch_c, prepare
            )
        return cls(f"tm_portable_{base}_out", f"portable/{base}.c", scratch_c, prepare)

    @property
    def c_name(self) -> str:
        """Enum prefix in the generated op_args.h (cmake/ops.cmake): "TORCHMCU_SLICE_COPY"."""
        name = self.symbol.removeprefix("tm_").removesuffix("_out")
        return name.upper()


@dataclass(frozen=True)
class Npu:
    """The operator on an Ethos-U, through TOSA. The hooks stay None until their family moves
    into the registry."""

    lower: Callable[..., Any] | None = None  # (g: tosa Graph, a: Args, read) -> tosa Tensor
    support: Callable[..., str | None] | None = None  # (b: Bound, family) -> reason | None
    pad_fold: str | None = None  # the argument a folded cortex_m::pad feeds ("input_offset")
    doc: str = ""  # "TOSA SLICE (step 1 only)": the docs line


@dataclass(frozen=True)
class KernelVariants:
    """Code paths of a kernel that an image may leave out (a selective build's size): `names`
    in the C kernel's order, `used(b)` the ones a bound call takes, mirroring the kernel's
    dispatch. Every call takes at least one, so a selected_operators.yaml that lists none of an
    operator's variants was not recorded and gets them all (torchmcu.selective.variants). C:
    TM_VARIANT_<Kernel.c_name>_<NAME> is 1 where compiled (op_args.h defaults every one to 1),
    and the kernel's argument check refuses, with TM_ERR_UNSUPPORTED, a call whose path was left
    out (a variant that only speeds a path up falls back to the slower path instead)."""

    names: tuple[str, ...]
    used: Callable[..., Iterable[str]]  # (b: Bound) -> names; b.data() may be None

    def __post_init__(self) -> None:
        bad = [n for n in self.names if not re.fullmatch(r"[a-z0-9_]+", n)]
        if bad or len(set(self.names)) != len(self.names) or not self.names:
            raise RegistryError(f"variant names {self.names}: distinct [a-z0-9_]+ names")


@dataclass(frozen=True)
class OpDef:
    """One operator: its schema, the kernel that runs it and each stage's part."""

    schema: Schema
    family: str  # one of FAMILIES
    kernel: Kernel
    reference: Callable[..., Any] | None = None  # (b: Bound) -> physical out array
    check: Callable[..., None] | None = None  # (b: Bound) -> None, raises on a bad argument
    scratch_bytes: Callable[..., int] | None = None
    macs: Callable[..., int] | None = None  # (b: Bound) -> multiply-accumulates
    npu: Npu | None = None
    no_npu: str | None = None  # why it never runs on the NPU, when it never does
    variant_of: str | None = None  # key of the op an _nhwc alias shares its schema and TU with
    call: str = "out"  # one of CALLS
    barrier: bool = False  # a fixed point of the NPU partitioner's schedule (loop ops)
    contract: str = ""  # the body of its docs/operators.md section
    variants: KernelVariants | None = None  # paths a selective image may leave out

    def __post_init__(self) -> None:
        key = self.schema.key
        if self.family not in FAMILIES:
            raise RegistryError(f"{key}: family {self.family!r} is not one of {FAMILIES}")
        if self.call not in CALLS:
            raise RegistryError(f"{key}: call {self.call!r} is not one of {CALLS}")
        if self.npu is not None and self.no_npu is not None:
            raise RegistryError(f"{key}: both npu and no_npu")
        outs = self.schema.outs
        if self.call == "out" and (len(outs) != 1 or self.schema.args[-1] is not outs[0]):
            raise RegistryError(f"{key}: call 'out' needs exactly one out, the last argument")
        if self.call == "multi_out" and (len(outs) < 2 or len(self.schema.returns) != len(outs)):
            raise RegistryError(f"{key}: call 'multi_out' needs two or more outs, all returned")

    @property
    def key(self) -> str:
        return self.schema.key

    def variant_macro(self, variant: str) -> str:
        """TM_VARIANT_<Kernel.c_name>_<VARIANT> (of a base operator: an _nhwc alias compiles
        in its base's translation unit and uses the base's macros)."""
        return f"TM_VARIANT_{self.kernel.c_name}_{variant.upper()}"

    @property
    def qualified(self) -> str:
        return self.schema.qualified


@dataclass(frozen=True)
class Annotate:
    """What the quantizer does with a node a Pattern matches."""

    kind: str  # one of ANNOTATE_KINDS
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if self.kind not in ANNOTATE_KINDS:
            raise RegistryError(f"annotate kind {self.kind!r} is not one of {ANNOTATE_KINDS}")


@dataclass(frozen=True)
class Pattern:
    """The aten side: the targets a rule lowers and the operators it emits. Targets are names
    ("aten::conv2d.default"), resolved to torch ops by the stage that reads them."""

    aten: tuple[str, ...]
    annotate: Annotate | None = None
    lower: Callable[..., Any] | None = None  # (k: Kit, node) -> None: the int8 rule
    lower_float: Callable[..., Any] | None = None  # (k: Kit, node) -> None: the fp32 rule
    emits: tuple[OpDef, ...] = ()
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


PATTERN_HOOKS = ("annotate", "lower", "lower_float")  # what a Pattern gives its targets


class Registry:
    """Operator definitions by key and the patterns, in registration order."""

    def __init__(self) -> None:
        self._ops: dict[str, OpDef] = {}
        self._patterns: list[Pattern] = []
        self._targets: dict[tuple[str, str], Pattern] = {}  # (target, hook) -> its pattern

    def add(self, definition: OpDef) -> OpDef:
        key = definition.key
        if key in self._ops:
            raise RegistryError(f"operator {key} is defined twice")
        if definition.variant_of is not None and definition.variant_of not in self._ops:
            raise RegistryError(f"{key}: variant_of {definition.variant_of} is not defined (yet)")
        k = definition.kernel
        for other in self._ops.values():
            if k.symbol == other.kernel.symbol or k.c_name == other.kernel.c_name:
                raise RegistryError(f"{key}: kernel {k.symbol} is {other.key}'s too")
        self._ops[key] = definition
        return definition

    def add_pattern(self, p: Pattern) -> Pattern:
        """A target may be in several patterns (the int8 rule beside the definition it emits,
        the fp32 rule beside the portable kernel), but each of its hooks is given once."""
        hooks = [h for h in PATTERN_HOOKS if getattr(p, h) is not None] or ["none"]
        for target in p.aten:
            for hook in hooks:
                if (target, hook) in self._targets:
                    raise RegistryError(f"aten target {target} has two patterns giving {hook}")
        for target in p.aten:
            for hook in hooks:
                self._targets[(target, hook)] = p
        self._patterns.append(p)
        return p

    def get(self, key: str) -> OpDef:
        try:
            return self._ops[key]
        except KeyError:
            raise KeyError(f"no operator {key!r} in the registry") from None

    def ops(self, family: str | None = None) -> list[OpDef]:
        """The definitions of `family` (all without), in registration order."""
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family {family!r} is not one of {FAMILIES}")
        return [o for o in self._ops.values() if family is None or o.family == family]

    def patterns(self) -> list[Pattern]:
        return list(self._patterns)

    def __contains__(self, key: object) -> bool:
        return key in self._ops

    def __len__(self) -> int:
        return len(self._ops)


REGISTRY = Registry()


def op(
    schema: str,
    *,
    family: str,
    kernel: Kernel | None = None,
    scratch_c: str | None = None,
    prepare: bool = False,
    registry: Registry | None = None,
    **fields: Any,
) -> OpDef:
    """Parse `schema`, build the definition and register it (a duplicate key fails). Without
    `kernel` the kernel is Kernel.by_name's, with the scratch-size function `scratch_c` and a
    prepare step when `prepare`."""
    parsed = Schema.parse(schema)
    if kernel is None:
        kernel = Kernel.by_name(parsed, scratch_c, prepare)
    elif scratch_c is not None:
        raise RegistryError(f"{parsed.key}: give scratch_c in its Kernel")
    elif prepare:
        raise RegistryError(f"{parsed.key}: give prepare in its Kernel")
    return (REGISTRY if registry is None else registry).add(OpDef(parsed, family, kernel, **fields))


def nhwc_variant(base: OpDef, registry: Registry | None = None) -> OpDef:
    """The _nhwc alias of `base`: the same arguments, sizes of input and out in NHWC order; its
    entry point tm_<ns>_<name>_nhwc_out sits in the base's translation unit (same body)."""
    schema = base.schema.renamed(base.schema.name + "_nhwc")
    kernel = Kernel(
        Kernel.by_name(schema).symbol,
        base.kernel.source,
        base.kernel.scratch_c,
        base.kernel.prepare,
    )
    return (REGISTRY if registry is None else registry).add(
        OpDef(
            schema,
            base.family,
            kernel,
            reference=base.reference,
            check=base.check,
            scratch_bytes=base.scratch_bytes,
            macs=base.macs,
            npu=base.npu,
            no_npu=base.no_npu,
            variant_of=base.key,
            call=base.call,
            barrier=base.barrier,
            contract=base.contract,
            variants=base.variants,
        )
    )


def pattern(*aten: str, registry: Registry | None = None, **fields: Any) -> Pattern:
    """Register a Pattern for the aten targets `aten` (a target in two patterns fails)."""
    return (REGISTRY if registry is None else registry).add_pattern(Pattern(tuple(aten), **fields))


def scalar_value(values: Sequence[pm.EValue], v: pm.EValue) -> Any:
    """An Int/Bool/Double's value, an IntList's values (through `values`), None for a Null;
    ValueError for any other EValue."""
    if isinstance(v, pm.Null):
        return None
    if isinstance(v, (pm.Int, pm.Bool, pm.Double)):
        return v.value
    if isinstance(v, pm.IntList):
        items = [values[k] for k in v.items]
        if not all(isinstance(item, pm.Int) for item in items):
            raise ValueError("int list refers to non-Int values")
        return [item.value for item in items]  # type: ignore[union-attr]
    raise ValueError(f"expected a scalar or int list, got {type(v).__name__}")


class Bound:
    """The named view of one KernelCall: `b.stride` (a scalar or int list), `b.tensor("weight")`
    (a pm.Tensor), `b.index("dim")` (its schema position). `values` are the plan's values, or the
    interpreter's copy of them (MoveCall rebinds scalars); `args` the call's value indices.

    A scalar argument reads as an attribute unless its name is one of Bound's own (`index`,
    `tensor`...): `b.scalar(name)` always works. The stages subclass it: the interpreter adds
    memory reads and the out write, the TOSA lowering constants and its error type."""

    def __init__(self, op: OpDef, values: Sequence[pm.EValue], args: Sequence[int]) -> None:
        self.op = op
        self.values = values
        self.args = list(args)

    def index(self, name: str) -> int:
        """The schema position of argument `name` (AttributeError for a name it lacks)."""
        return self.op.schema.A[name]

    def value_index(self, name: str) -> int:
        """The plan value argument `name` refers to."""
        return self.args[self.index(name)]

    def value(self, name: str) -> pm.EValue:
        return self.values[self.value_index(name)]

    def is_none(self, name: str) -> bool:
        return isinstance(self.value(name), pm.Null)

    def reject(self, name: str, message: str) -> ArgError:
        """The ArgError naming argument `name` (raise it)."""
        return ArgError(self.index(name), name, message)

    def scalar(self, name: str) -> Any:
        """An Int/Bool/Double's value, an IntList's values, None for a Null."""
        try:
            return scalar_value(self.values, self.value(name))
        except ValueError as exc:
            raise self.reject(name, str(exc)) from None

    def int_in(self, name: str, lo: int, hi: int) -> int:
        """tm_int_arg: argument `name` as an Int within [lo, hi] (else its ArgError)."""
        v = self.value(name)
        if not (isinstance(v, pm.Int) and lo <= v.value <= hi):
            raise self.reject(name, f"expected an int in [{lo}, {hi}]")
        return v.value

    def pair_or_none(
        self, name: str, lo: int, hi: int, allow_single: bool = False
    ) -> tuple[int, int] | None:
        """tm_pair_arg: argument `name` as an int list of 2 Int items (or 1, used for both, if
        allow_single), each in [lo, hi], as (h, w); None when it breaks that rule."""
        v = self.value(name)
        if not isinstance(v, pm.IntList) or not (1 if allow_single else 2) <= len(v.items) <= 2:
            return None
        items = [self.values[i] for i in v.items]
        if not all(isinstance(item, pm.Int) and lo <= item.value <= hi for item in items):
            return None
        return int(items[0].value), int(items[-1].value)  # type: ignore[union-attr]

    def pair_in(self, name: str, lo: int, hi: int, allow_single: bool = False) -> tuple[int, int]:
        """pair_or_none, or its ArgError."""
        pair = self.pair_or_none(name, lo, hi, allow_single)
        if pair is None:
            one = "1 or " if allow_single else ""
            raise self.reject(name, f"expected {one}2 ints in [{lo}, {hi}]")
        return pair

    def tensor(self, name: str) -> pm.Tensor:
        v = self.value(name)
        if not isinstance(v, pm.Tensor):
            raise self.reject(name, f"expected a Tensor, got {type(v).__name__}")
        return v

    def data(self, name: str) -> Any:
        """Tensor `name`'s elements in memory order where the stage can read them (the
        interpreter its memory, the TOSA lowering its constants), else None: a check then
        leaves the rules on values to the kernel."""
        del name
        return None

    def check(self) -> None:
        """The operator's argument check (raises ArgError); nothing if it has none."""
        if self.op.check is not None:
            self.op.check(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("op", "values", "args"):
            raise AttributeError(name)
        return self.scalar(name)


def bind(op: OpDef, values: Sequence[pm.EValue], args: Sequence[int]) -> Bound:
    """The named view of a KernelCall of `op` with value indices `args` into `values`."""
    return Bound(op, values, args)

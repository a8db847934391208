"""The plan's filters on one input record: Spark's printed condition, evaluated as Spark would.

A physical plan prints a ``Filter``'s condition the way Catalyst writes expressions:
``(isnotnull(is_bot#26) AND NOT is_bot#26)``, ``kind#219 IN (buy,refund)``, ``NOT StartsWith(page#776,
/health)``, ``(cast(amount#1319 as double) >= 1.0)``, ``CASE WHEN (value#4 > 10) THEN true ELSE false END``.
Attributes carry their expression id (``name#id``); string literals are printed without quotes, so a
bare word that is not an attribute is text. The evaluator reads that grammar and evaluates it on the
record's values with SQL's three-valued logic (a filter keeps a row only when its condition is true:
null filters it out, as Spark does). What it does not know (a function, a column the record lacks) is
never guessed: ``evaluate`` raises ``NotEvaluated`` with what it could not read, and the answer names
the filter as not evaluated.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any

from statelens.analysis.inputs.records import event_time_us, utc_time


class NotEvaluated(Exception):
    """The condition holds something this evaluator does not read (the message says what)."""


@dataclass(frozen=True)
class Verdict:
    passes: bool | None  # None: not evaluated (see ``why``)
    why: str | None = None


def filter_passes(condition: str, values: dict[str, Any], columns: set[str] | None = None) -> Verdict:
    """Whether a record passes a filter: ``condition`` as the plan printed it, ``values`` the record by
    column name, ``columns`` every column the source has (a column the record lacks is null; without
    ``columns`` a missing column cannot be told from a renamed one)."""
    try:
        return Verdict(evaluate(condition, values, columns) is True)
    except NotEvaluated as e:
        return Verdict(None, str(e))


def evaluate(condition: str, values: dict[str, Any], columns: set[str] | None = None) -> Any:
    parser = _Parser(condition)
    node = parser.expr()
    parser.skip()
    if parser.i != len(parser.s):
        raise NotEvaluated(f"cannot read {parser.s[parser.i :][:40]!r}")
    return node.eval(_Row(values, columns))


# --------------------------------------------------------------------------- the record


class _Row:
    def __init__(self, values: dict[str, Any], columns: set[str] | None) -> None:
        self.values = values
        self.columns = columns

    def get(self, name: str) -> Any:
        if name in self.values:
            v = self.values[name]
            return None if v == "" else v  # an empty CSV field reads as null
        if self.columns is not None and name in self.columns:
            return None  # a JSON record without the field: null
        raise NotEvaluated(f"the record has no column {name}")


# --------------------------------------------------------------------------- expressions


class _Node:
    def eval(self, row: _Row) -> Any:
        raise NotImplementedError


@dataclass
class _Attr(_Node):
    name: str
    event_time: bool = False  # the watermark's column: a timestamp
    long: bool = False  # a bigint column (Spark's plan writes ``name#idL``)

    def eval(self, row: _Row) -> Any:
        v = row.get(self.name)
        if self.event_time and isinstance(v, str) and not v.strip().isdigit() and event_time_us(v) is None:
            return None  # text that is no time: Spark's reader makes it null in a timestamp column
        if self.long and isinstance(v, str) and not re.fullmatch(r"\s*[+-]?\d+\s*", v):
            return None  # text that is no whole number: Spark's reader makes it null in a bigint column
        return v


@dataclass
class _Lit(_Node):
    value: Any

    def eval(self, row: _Row) -> Any:
        return self.value


@dataclass
class _Not(_Node):
    arg: _Node

    def eval(self, row: _Row) -> Any:
        v = _bool(self.arg.eval(row))
        return None if v is None else not v


@dataclass
class _Logic(_Node):
    op: str  # AND | OR
    args: list[_Node]

    def eval(self, row: _Row) -> Any:
        vals = []
        unknown: NotEvaluated | None = None
        for a in self.args:
            try:
                vals.append(_bool(a.eval(row)))
            except NotEvaluated as e:  # false AND ?, true OR ? are told without it
                unknown = e
        if self.op == "AND":
            if False in vals:
                return False
            if unknown:
                raise unknown
            return None if None in vals else True
        if True in vals:
            return True
        if unknown:
            raise unknown
        return None if None in vals else False


@dataclass
class _Compare(_Node):
    op: str
    left: _Node
    right: _Node

    def eval(self, row: _Row) -> Any:
        a, b = self.left.eval(row), self.right.eval(row)
        if self.op == "<=>":
            if a is None or b is None:
                return a is None and b is None
            return _cmp(a, b) == 0
        if a is None or b is None:
            return None
        c = _cmp(a, b)
        return {"=": c == 0, "!=": c != 0, "<>": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[self.op]


@dataclass
class _In(_Node):
    arg: _Node
    items: list[_Node]

    def eval(self, row: _Row) -> Any:
        v = self.arg.eval(row)
        if v is None:
            return None
        items = [i.eval(row) for i in self.items]
        if any(i is not None and _cmp(v, i) == 0 for i in items):
            return True
        return None if None in items else False


@dataclass
class _Like(_Node):
    arg: _Node
    pattern: _Node
    regex: bool = False  # RLIKE

    def eval(self, row: _Row) -> Any:
        v, p = self.arg.eval(row), self.pattern.eval(row)
        if v is None or p is None:
            return None
        if self.regex:
            return re.search(str(p), _text(v)) is not None
        rx = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in str(p))
        return re.fullmatch(rx, _text(v), re.S) is not None


@dataclass
class _Func(_Node):
    name: str
    args: list[_Node]

    def eval(self, row: _Row) -> Any:
        name = self.name.lower()
        if name in ("isnull", "isnotnull"):
            v = self.args[0].eval(row)
            return (v is None) == (name == "isnull")
        if name == "coalesce":
            for a in self.args:
                v = a.eval(row)
                if v is not None:
                    return v
            return None
        vals = [a.eval(row) for a in self.args]
        if name in ("trim", "ltrim", "rtrim"):  # trim(col, None): Spark's default trims spaces
            chars = " " if len(vals) < 2 or vals[1] in (None, "None") else _text(vals[1])
            if vals[0] is None:
                return None
            return {"trim": str.strip, "ltrim": str.lstrip, "rtrim": str.rstrip}[name](_text(vals[0]), chars)
        if name == "rlike":
            return None if None in vals else re.search(_text(vals[1]), _text(vals[0])) is not None
        if name in _STRING_TESTS:
            if None in vals:
                return None
            return _STRING_TESTS[name](_text(vals[0]), _text(vals[1]))
        if name in _FUNCTIONS:
            return None if None in vals else _FUNCTIONS[name](*vals)
        raise NotEvaluated(f"the function {self.name} is not evaluated")


@dataclass
class _Cast(_Node):
    arg: _Node
    to: str

    def eval(self, row: _Row) -> Any:
        return _cast(self.arg.eval(row), self.to)


@dataclass
class _Case(_Node):
    subject: _Node | None
    whens: list[tuple[_Node, _Node]]
    default: _Node | None

    def eval(self, row: _Row) -> Any:
        s = self.subject.eval(row) if self.subject is not None else None
        for cond, then in self.whens:
            c = cond.eval(row)
            hit = (s is not None and c is not None and _cmp(s, c) == 0) if self.subject is not None else _bool(c) is True
            if hit:
                return then.eval(row)
        return self.default.eval(row) if self.default is not None else None


@dataclass
class _Arith(_Node):
    op: str
    left: _Node
    right: _Node

    def eval(self, row: _Row) -> Any:
        x, y = self.left.eval(row), self.right.eval(row)
        if isinstance(x, dt.timedelta) or isinstance(y, dt.timedelta):  # a time plus or minus an interval
            return _shifted(x, y, self.op)
        a, b = _number(x), _number(y)
        if a is None or b is None:
            return None
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "*":
            return a * b
        if b == 0:
            return None  # Spark's / and % by zero: null (ANSI off), an error (ANSI on): the row is not kept either way
        return a / b if self.op == "/" else math.fmod(a, b)


def _shifted(x: Any, y: Any, op: str) -> Any:
    """A timestamp plus or minus an interval (either side for ``+``); null where one is null."""
    if x is None or y is None:
        return None
    if isinstance(x, dt.timedelta) and op == "+":
        x, y = y, x
    t = _time(x)
    if t is None or not isinstance(y, dt.timedelta) or op not in "+-":
        raise NotEvaluated("an interval in arithmetic other than a time plus or minus it")
    when = utc_time(t)
    return when + y if op == "+" else when - y


_INTERVAL_UNITS = {
    "microsecond": 1,
    "millisecond": 1_000,
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}
# an interval as the plan prints it (``10 minutes``, ``1 hours 30 minutes``) or as SQL writes it
# (``INTERVAL 10 MINUTES``, ``INTERVAL '10' MINUTE``)
_INTERVAL = re.compile(
    r"(?:INTERVAL\s+)?((?:'?[+-]?\d+'?\s+(?:microsecond|millisecond|second|minute|hour|day|week)s?\b\s*)+)", re.I
)
_INTERVAL_PART = re.compile(r"'?([+-]?\d+)'?\s+(microsecond|millisecond|second|minute|hour|day|week)s?", re.I)


def _interval(text: str) -> dt.timedelta:
    us = sum(int(n) * _INTERVAL_UNITS[u.lower()] for n, u in _INTERVAL_PART.findall(text))
    return dt.timedelta(microseconds=us)


_STRING_TESTS = {
    "startswith": lambda a, b: a.startswith(b),
    "endswith": lambda a, b: a.endswith(b),
    "contains": lambda a, b: b in a,
}
_FUNCTIONS = {
    "lower": lambda v: _text(v).lower(),
    "upper": lambda v: _text(v).upper(),
    "length": lambda v: len(_text(v)),
    "char_length": lambda v: len(_text(v)),
    "abs": lambda v: abs(_number(v) or 0),
}


# --------------------------------------------------------------------------- values as Spark compares them


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(v)
    return str(v)


def _number(v: Any) -> float | int | None:
    if v is None or isinstance(v, bool):
        return None if v is None else int(v)
    if isinstance(v, (int, float)):
        return v
    try:
        text = str(v).strip()
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
    except ValueError:
        return None


def _bool(v: Any) -> bool | None:
    if v is None or isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("true", "t", "yes", "y", "1"):
        return True
    if text in ("false", "f", "no", "n", "0"):
        return False
    raise NotEvaluated(f"{v!r} is not a boolean")


def _time(v: Any) -> int | None:
    if isinstance(v, (dt.datetime, str)):
        return event_time_us(v)
    return None


def _cmp(a: Any, b: Any) -> int:
    """Compare as Spark coerces: booleans, numbers, timestamps, else text."""
    if isinstance(a, bool) or isinstance(b, bool):
        x, y = _bool(a), _bool(b)
        return (x > y) - (x < y)  # type: ignore[operator]
    na, nb = _number(a), _number(b)
    if na is not None and nb is not None and not (isinstance(a, str) and isinstance(b, str)):
        return (na > nb) - (na < nb)
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime) or (_looks_timed(a) and _looks_timed(b)):
        ta, tb = _time(a), _time(b)
        if ta is not None and tb is not None:
            return (ta > tb) - (ta < tb)
    if na is not None and nb is not None:  # two numeric texts: Spark compares strings as strings
        pass
    sa, sb = _text(a), _text(b)
    return (sa > sb) - (sa < sb)


def _looks_timed(v: Any) -> bool:
    return isinstance(v, str) and bool(re.match(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}", v))


def _cast(v: Any, to: str) -> Any:
    if v is None:
        return None
    to = to.lower()
    if to in ("string", "varchar", "char") or to.startswith(("varchar(", "char(")):
        return _text(v)
    if to in ("int", "integer", "bigint", "smallint", "tinyint", "long", "short", "byte"):
        n = _number(v)
        return None if n is None or (isinstance(n, float) and not math.isfinite(n)) else int(n)
    if to in ("double", "float", "real") or to.startswith("decimal"):
        n = _number(v)
        return None if n is None else float(n)
    if to in ("boolean", "bool"):
        try:
            return _bool(v)
        except NotEvaluated:
            return None
    if to == "timestamp":
        t = _time(v)
        return utc_time(t) if t is not None else None
    if to == "date":
        t = _time(v)
        return utc_time(t).date().isoformat() if t is not None else None
    raise NotEvaluated(f"a cast to {to} is not evaluated")


# --------------------------------------------------------------------------- the printed grammar

# a column as the plan names it: name#id, ``-T<delay>ms`` on an event-time column (a timestamp), a field
_ATTR = re.compile(r"([A-Za-z_][\w$]*(?:\([\w$]*\))?)#\d+(L)?(-T\d+ms)?(?:\.([A-Za-z_][\w$]*))?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[LDSYBF]?(?=$|[\s),])")
_COMPARE = ("<=>", "<=", ">=", "!=", "<>", "=", "<", ">")
# a bare literal ends where the expression around it goes on
_LITERAL_END = re.compile(
    r"\)|,| (?:AND|OR|THEN|ELSE|END|WHEN|IN|INSET|LIKE|RLIKE|ESCAPE)\b| (?:<=>|<=|>=|!=|<>|=|<|>|\+|-|\*|/|%) "
)


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text.strip()
        self.i = 0

    # -- helpers
    def skip(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self, word: str) -> bool:
        self.skip()
        if not self.s.startswith(word, self.i):
            return False
        end = self.i + len(word)
        return not (word[-1].isalnum() and end < len(self.s) and (self.s[end].isalnum() or self.s[end] == "_"))

    def take(self, word: str) -> bool:
        if self.peek(word):
            self.i += len(word)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise NotEvaluated(f"cannot read the condition at {self.s[self.i :][:30]!r}")

    # -- grammar, loosest first
    def expr(self) -> _Node:
        return self.disjunction()

    def disjunction(self) -> _Node:
        args = [self.conjunction()]
        while self.take("OR"):
            args.append(self.conjunction())
        return args[0] if len(args) == 1 else _Logic("OR", args)

    def conjunction(self) -> _Node:
        args = [self.negation()]
        while self.take("AND"):
            args.append(self.negation())
        return args[0] if len(args) == 1 else _Logic("AND", args)

    def negation(self) -> _Node:
        if self.take("NOT"):
            return _Not(self.negation())
        return self.comparison()

    def comparison(self) -> _Node:
        left = self.additive()
        self.skip()
        negated = self.take("NOT")
        if self.take("IN"):
            self.expect("(")
            items = self.items(")")
            node: _Node = _In(left, items)
        elif self.take("INSET"):
            node = _In(left, [_Lit(_literal(t.strip())) for t in self.rest_until_close().split(",") if t.strip()])
        elif self.take("RLIKE"):
            node = _Like(left, self.operand(), regex=True)
        elif self.take("LIKE"):
            node = _Like(left, self.operand())
            if self.take("ESCAPE"):
                self.operand()  # Spark's default escape; a custom one is read as the default
        else:
            if negated:
                raise NotEvaluated("cannot read NOT here")
            for op in _COMPARE:
                if self.peek(op):
                    self.i += len(op)
                    return _Compare(op, left, self.additive())
            return left
        return _Not(node) if negated else node

    def additive(self) -> _Node:
        node = self.multiplicative()
        while True:
            self.skip()
            op = next((o for o in ("+", "-") if self.s.startswith(f"{o} ", self.i)), None)
            if op is None:
                return node
            self.i += 1
            node = _Arith(op, node, self.multiplicative())

    def multiplicative(self) -> _Node:
        node = self.operand()
        while True:
            self.skip()
            op = next((o for o in ("*", "/", "%") if self.s.startswith(f"{o} ", self.i)), None)
            if op is None:
                return node
            self.i += 1
            node = _Arith(op, node, self.operand())

    def operand(self) -> _Node:
        self.skip()
        s, i = self.s, self.i
        if s.startswith("(", i):
            self.i += 1
            node = self.expr()
            self.expect(")")
            return node
        if self.take("CASE"):
            return self.case()
        if s.startswith(("cast(", "CAST("), i):
            self.i += 5
            arg = self.expr()
            self.expect("as")
            to = re.match(r"\s*([\w(), ]+?)\)", s[self.i :])
            if not to:
                raise NotEvaluated("cannot read a cast")
            self.i += to.end()
            return _Cast(arg, to.group(1).strip())
        m = _ATTR.match(s, i)
        if m:
            self.i = m.end()
            if m.group(4):
                raise NotEvaluated(f"the field {m.group(4)} of {m.group(1)} is not evaluated")
            return _Attr(m.group(1), bool(m.group(3)), bool(m.group(2)))
        m = re.match(r"([A-Za-z_][\w]*)\(", s[i:])
        if m:
            self.i += m.end()
            return _Func(m.group(1), self.items(")"))
        m = _INTERVAL.match(s, i)
        if m:
            self.i = m.end()
            return _Lit(_interval(m.group(1)))
        m = _NUMBER.match(s, i)
        if m:
            self.i = m.end()
            return _Lit(_literal(m.group(0)))
        if s.startswith("-", i):  # a negative operand: -x
            self.i += 1
            return _Arith("-", _Lit(0), self.operand())
        return _Lit(_literal(self.bare()))

    def case(self) -> _Node:
        subject = None if self.peek("WHEN") else self.expr()
        whens = []
        while self.take("WHEN"):
            cond = self.expr()
            self.expect("THEN")
            whens.append((cond, self.expr()))
        default = self.expr() if self.take("ELSE") else None
        self.expect("END")
        return _Case(subject, whens, default)

    def items(self, close: str) -> list[_Node]:
        out: list[_Node] = []
        if self.take(close):
            return out
        while True:
            out.append(self.expr())
            if self.take(close):
                return out
            self.expect(",")

    def bare(self) -> str:
        """A literal printed without quotes: up to where the expression around it goes on."""
        m = _LITERAL_END.search(self.s, self.i)
        end = m.start() if m else len(self.s)
        text = self.s[self.i : end]
        if not text.strip():
            raise NotEvaluated(f"cannot read the condition at {self.s[self.i :][:30]!r}")
        self.i = end
        return text

    def rest_until_close(self) -> str:
        depth, start = 0, self.i
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            self.i += 1
        return self.s[start : self.i]


def _literal(text: str) -> Any:
    t = text.strip()
    low = t.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    if _NUMBER.fullmatch(t):
        body = t.rstrip("LDSYBF")
        return int(body) if re.fullmatch(r"[+-]?\d+", body) else float(body)
    return t

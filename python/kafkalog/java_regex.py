"""Java regular expressions (``java.util.regex.Pattern``, what Spark's Kafka source compiles
``subscribePattern`` with) as Python ``re`` patterns that pick the same topics.

Python reads some Java syntax differently, or not at all: ``\\Q...\\E``, ``\\p{Lower}``, ``\\h``,
class unions and intersections (``[a-z&&[^g]]``, where Python sees a literal ``[`` and ``&``),
``(?<name>...)``, flags set mid-pattern. Those are translated. Kafka topic names are ASCII
(``[a-zA-Z0-9._-]``), so classes are worked out over ASCII, which is exact for any topic name.
What cannot be translated (``\\X``, ``\\b{g}``, an unknown ``\\p{...}``) is refused, never
guessed at: a pattern that silently picks other topics than Spark's would lose data.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from typing import Callable, Dict, FrozenSet, List, Optional, Tuple

__all__ = ["JavaRegexError", "to_python", "compile_java"]

ASCII = frozenset(range(128))


class JavaRegexError(ValueError):
    """A pattern Java refuses, or one whose meaning Python's ``re`` cannot express."""


def _chars(s: str) -> FrozenSet[int]:
    return frozenset(ord(c) for c in s)


def _span(lo: str, hi: str) -> FrozenSet[int]:
    return frozenset(range(ord(lo), ord(hi) + 1))


def _where(pred: Callable[[str], bool]) -> FrozenSet[int]:
    return frozenset(c for c in ASCII if pred(chr(c)))


_LOWER, _UPPER, _DIGIT = _span("a", "z"), _span("A", "Z"), _span("0", "9")
_ALPHA = _LOWER | _UPPER
_PUNCT = _chars("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_SPACE = _chars(" \t\n\x0b\f\r")
_WORD = _ALPHA | _DIGIT | _chars("_")
_HSPACE = _chars(" \t")  # ASCII part of \h (the rest, \xa0 and up, is never in a topic name)
_VSPACE = _chars("\n\x0b\f\r")

# Java's POSIX classes (US-ASCII, as Pattern documents them) and java.lang.Character ones.
_PROPERTIES: Dict[str, FrozenSet[int]] = {
    "Lower": _LOWER, "Upper": _UPPER, "ASCII": ASCII, "Alpha": _ALPHA, "Digit": _DIGIT,
    "Alnum": _ALPHA | _DIGIT, "Punct": _PUNCT, "Graph": _ALPHA | _DIGIT | _PUNCT,
    "Print": _ALPHA | _DIGIT | _PUNCT | _chars(" "), "Blank": _chars(" \t"),
    "Cntrl": frozenset(range(32)) | {127}, "XDigit": _DIGIT | _span("a", "f") | _span("A", "F"),
    "Space": _SPACE,
    "javaLowerCase": _LOWER, "javaUpperCase": _UPPER, "javaWhitespace": _SPACE | _chars("\x1c\x1d\x1e\x1f"),
    "javaMirrored": _chars("()<>[]{}"), "javaDigit": _DIGIT, "javaLetter": _ALPHA,
    "javaLetterOrDigit": _ALPHA | _DIGIT, "javaAlphabetic": _ALPHA,
    # Unicode binary properties and scripts, over ASCII.
    "IsAlphabetic": _ALPHA, "IsLetter": _ALPHA, "IsLowercase": _LOWER, "IsUppercase": _UPPER,
    "IsDigit": _DIGIT, "IsPunctuation": _where(lambda c: unicodedata.category(c).startswith("P")),
    "IsWhite_Space": _SPACE, "IsWhiteSpace": _SPACE,
    "IsControl": frozenset(range(32)) | {127}, "IsHex_Digit": _DIGIT | _span("a", "f") | _span("A", "F"),
    "IsHexDigit": _DIGIT | _span("a", "f") | _span("A", "F"), "IsLatin": _ALPHA,
    "InBasicLatin": ASCII, "InBasic_Latin": ASCII, "InBASIC_LATIN": ASCII, "IsAssigned": ASCII,
}
_CATEGORIES = {"L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
               "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
               "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Co", "Cs", "Cn", "LC", "LD"}


def _category(name: str) -> Optional[FrozenSet[int]]:
    for prefix in ("general_category=", "gc=", "Is", ""):
        if name.startswith(prefix) and name[len(prefix):] in _CATEGORIES:
            cat = name[len(prefix):]
            if cat == "LC":
                return _ALPHA
            if cat == "LD":
                return _ALPHA | _DIGIT
            return _where(lambda c: unicodedata.category(c).startswith(cat))
    return None


def _property(name: str) -> FrozenSet[int]:
    found = _PROPERTIES.get(name)
    if found is None:
        found = _category(name)
    if found is None:
        raise JavaRegexError(f"\\p{{{name}}} is a character property this translation does not know")
    return found


def _class_text(members: FrozenSet[int], negated: bool = False) -> str:
    if not members:
        return "[^\\x00-\\U0010ffff]" if not negated else "[\\x00-\\U0010ffff]"
    body = "".join(re.escape(chr(c)) if chr(c) not in "-]\\^[" else "\\" + chr(c) for c in sorted(members))
    return f"[{'^' if negated else ''}{body}]"


_SCOPED_FLAGS = "ims"  # 'x' (comments) is applied here: Java's skips blanks in classes too
_DROPPED_FLAGS = "duU"  # line terminators and Unicode rules: no effect on ASCII topic names
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.comments = False  # Java's COMMENTS flag, (?x): blanks and #-comments left out

    def skip_comments(self) -> None:
        while self.comments and self.i < len(self.p):
            c = self.p[self.i]
            if c in " \t\n\x0b\f\r":
                self.i += 1
            elif c == "#":
                end = self.p.find("\n", self.i)
                self.i = len(self.p) if end < 0 else end + 1
            else:
                break

    def error(self, what: str) -> JavaRegexError:
        return JavaRegexError(f"{what} at index {self.i} of {self.p!r}")

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.p[j] if j < len(self.p) else ""

    def translate(self) -> str:
        out = self.sequence(top=True)
        if self.i < len(self.p):
            raise self.error("unmatched ')'")
        return out

    # -- outside classes --------------------------------------------------------------------
    def sequence(self, top: bool = False) -> str:
        out: List[str] = []
        # Flags set mid-group hold to the group's end, across its alternatives: each change opens a
        # '(?flags:' closed at every '|' (and reopened after it) and at the end of the group.
        opened: List[str] = []
        while True:
            self.skip_comments()
            if self.i >= len(self.p):
                break
            c = self.p[self.i]
            if c == ")":
                break
            if c == "|":
                self.i += 1
                out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
                continue
            flags = re.match(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?\)", self.p[self.i:])
            if flags:
                self.i += flags.end()
                spec = self.flags(flags.group(1), flags.group(2) or "")
                if spec and top and not out and not opened and "-" not in spec:
                    out.append(f"(?{spec})")  # at the very start: global, as Python wants them
                elif spec:
                    out.append(f"(?{spec}:")
                    opened.append(spec)
                continue
            out.append(self.atom())
            out.append(self.quantifier())
        out.append(")" * len(opened))
        return "".join(out)

    def flags(self, on: str, off: str) -> str:
        """Java inline flags as Python's: 'i-s' style, those without effect on topic names left out."""
        bad = set(on + off) - set(_SCOPED_FLAGS + _DROPPED_FLAGS + "x")
        if bad:
            raise self.error(f"unknown inline flag {''.join(sorted(bad))!r}")
        if "x" in on + off:
            self.comments = "x" in on
        on = "".join(f for f in on if f in _SCOPED_FLAGS)
        off = "".join(f for f in off if f in _SCOPED_FLAGS)
        return on + (f"-{off}" if off else "")

    def quantifier(self) -> str:
        self.skip_comments()
        c = self.peek()
        if c in ("*", "+", "?"):
            self.i += 1
            q = c
        elif c == "{":
            m = _QUANTIFIER.match(self.p, self.i)
            if not m:
                raise self.error("illegal repetition")
            if m.group(3) and int(m.group(3)) < int(m.group(1)):
                raise self.error("illegal repetition range")
            self.i = m.end()
            q = m.group(0)
        else:
            return ""
        self.skip_comments()
        mode = self.peek()
        if mode == "?":
            self.i += 1
            return q + "?"
        if mode == "+":
            self.i += 1
            if sys.version_info < (3, 11):
                raise self.error("a possessive quantifier needs Python 3.11 or later")
            return q + "+"
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and _QUANTIFIER.match(self.p, self.i)):
            raise self.error("dangling meta character")
        return q

    def atom(self) -> str:
        c = self.p[self.i]
        if c == "\\":
            return self.escape()
        if c == "[":
            return self.char_class()
        if c == "(":
            return self.group()
        if c in "*+?":
            raise self.error(f"dangling meta character {c!r}")
        if c == "{":
            raise self.error("illegal repetition")
        self.i += 1
        if c in ".^$":
            return c
        return re.escape(c)

    def group(self) -> str:
        self.i += 1
        head = "("
        comments = self.comments  # flags a group sets end with it
        if self.peek() == "?":
            rest = self.p[self.i:]
            for java, python in (("?:", "?:"), ("?=", "?="), ("?!", "?!"), ("?<=", "?<="),
                                 ("?<!", "?<!"), ("?>", "?>")):
                if rest.startswith(java):
                    if java == "?>" and sys.version_info < (3, 11):
                        raise self.error("an atomic group needs Python 3.11 or later")
                    head = "(" + python
                    self.i += len(java)
                    break
            else:
                named = re.match(r"\?<([a-zA-Z][a-zA-Z0-9]*)>", rest)
                scoped = re.match(r"\?([a-zA-Z]*)(?:-([a-zA-Z]*))?:", rest)
                if named:
                    head = f"(?P<{named.group(1)}>"
                    self.i += named.end()
                elif scoped:
                    spec = self.flags(scoped.group(1), scoped.group(2) or "")
                    head = f"(?{spec}:" if spec else "(?:"
                    self.i += scoped.end()
                else:
                    raise self.error("unknown group type")
        body = self.sequence()
        if self.peek() != ")":
            raise self.error("unclosed group")
        self.i += 1
        self.comments = comments
        return head + body + ")"

    def escape(self) -> str:
        self.i += 1
        c = self.peek()
        if not c:
            raise self.error("unexpected end: a trailing backslash")
        if c == "Q":
            return re.escape(self.quoted())
        if c == "E":
            raise self.error("\\E without \\Q")
        if c.isdigit() and c != "0":
            self.i += 1
            return f"(?:\\{c})"
        if c == "k":
            m = re.match(r"k<([a-zA-Z][a-zA-Z0-9]*)>", self.p[self.i:])
            if not m:
                raise self.error("\\k is not followed by <name>")
            self.i += m.end()
            return f"(?P={m.group(1)})"
        anchors = {"b": r"\b", "B": r"\B", "A": r"\A", "z": r"\Z", "G": r"\A",
                   "Z": r"(?=(?:\r\n|[\n\r\x85\u2028\u2029])?\Z)",
                   "R": r"(?:\r\n|[\n\x0b\f\r\x85\u2028\u2029])"}
        if c in anchors:
            if c == "b" and self.peek(1) == "{":
                raise self.error("\\b{g} (grapheme boundaries) is not supported")
            self.i += 1
            return anchors[c]
        if c in "XN":
            raise self.error(f"\\{c} is not supported")
        members, negated, single = self.class_escape()
        if single:
            return re.escape(chr(next(iter(members))))
        return _class_text(members, negated)

    def quoted(self) -> str:
        """The text of ``\\Q...\\E`` (to the end of the pattern without ``\\E``), past it."""
        self.i += 1
        end = self.p.find("\\E", self.i)
        text = self.p[self.i:] if end < 0 else self.p[self.i:end]
        self.i = len(self.p) if end < 0 else end + 2
        return text

    def class_escape(self) -> Tuple[FrozenSet[int], bool, bool]:
        """An escape after its backslash that stands for characters: their set (over ASCII for
        classes), whether it is negated, and whether it is one character."""
        c = self.p[self.i]
        self.i += 1
        shorthand = {"d": _DIGIT, "s": _SPACE, "w": _WORD, "h": _HSPACE, "v": _VSPACE}
        if c.lower() in shorthand:
            return shorthand[c.lower()], c.isupper(), False
        if c in "pP":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                if end < 0:
                    raise self.error("unclosed character family")
                name = self.p[self.i + 1:end]
                self.i = end + 1
            elif self.peek():
                name = self.p[self.i]
                self.i += 1
            else:
                raise self.error("illegal character family")
            negated = c == "P"
            if name.startswith("^"):
                name, negated = name[1:], not negated
            return _property(name), negated, False
        simple = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\x07", "e": "\x1b"}
        if c in simple:
            return _chars(simple[c]), False, True
        # Octal \0n, \0nn, \0mnn; hex \xhh, \x{h...}; \uhhhh: one code point each.
        numeric = {"0": (r"[0-3]?[0-7]{1,2}|[0-7]", 8, "octal"),
                   "x": (r"\{([0-9a-fA-F]+)\}|[0-9a-fA-F]{2}", 16, "hexadecimal"),
                   "u": (r"[0-9a-fA-F]{4}", 16, "Unicode")}
        if c in numeric:
            shape, base, what = numeric[c]
            m = re.match(shape, self.p[self.i:])
            if not m:
                raise self.error(f"illegal {what} escape")
            self.i += m.end()
            return frozenset({int(m.group(m.lastindex or 0), base)}), False, True
        if c == "c":
            if not self.peek():
                raise self.error("illegal control escape")
            self.i += 1
            return frozenset({ord(self.p[self.i - 1]) ^ 64}), False, True
        if c.isalpha():
            raise self.error(f"illegal/unsupported escape sequence \\{c}")
        return frozenset({ord(c)}), False, True

    # -- classes -------------------------------------------------------------------------------
    def char_class(self) -> str:
        members, negated = self.class_set()
        return _class_text(members, negated)

    def class_set(self) -> Tuple[FrozenSet[int], bool]:
        """``[...]`` from its ``[``: its members over ASCII, and whether it is negated at the top
        (kept as a negated Python class, so case-insensitive matching negates as Java does)."""
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        operands: List[FrozenSet[int]] = []
        union: set = set()
        first = True
        while True:
            if self.comments:
                while self.peek() and self.peek() in " \t\n\x0b\f\r":
                    self.i += 1
            c = self.peek()
            if not c:
                raise self.error("unclosed character class")
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if self.p.startswith("&&", self.i):
                self.i += 2
                operands.append(frozenset(union))
                union = set()
                continue
            if c == "[":
                inner, inner_negated = self.class_set()
                union |= (ASCII - inner) if inner_negated else inner
                continue
            lo = self.class_char()
            if lo is None:
                continue
            if isinstance(lo, frozenset):
                union |= lo
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", "[", ""):
                self.i += 1
                hi = self.class_char()
                if not isinstance(hi, int):
                    raise self.error("illegal character range")
                if hi < lo:
                    raise self.error("illegal character range")
                union |= set(range(lo, hi + 1)) & ASCII
                continue
            if lo < 128:
                union.add(lo)
        operands.append(frozenset(union))
        result = operands[0]
        for other in operands[1:]:
            result &= other
        return result, negated

    def class_char(self):
        """One member of a class: a code point, a set (an escape standing for several), or
        None (an empty ``\\Q\\E``)."""
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        self.i += 1
        if not self.peek():
            raise self.error("unclosed character class")
        if self.peek() == "Q":
            text = self.quoted()
            return _chars(text) & ASCII if text else None
        members, negated, single = self.class_escape()
        if single:
            return next(iter(members))
        return ASCII - members if negated else members


def to_python(pattern: str) -> str:
    """The Python ``re`` pattern that finds what Java's ``Pattern.compile(pattern)`` finds in a
    Kafka topic name; ``JavaRegexError`` where Java refuses the pattern or Python cannot say it."""
    return _Translator(pattern).translate()


def compile_java(pattern: str) -> "re.Pattern[str]":
    """:func:`to_python`, compiled."""
    python = to_python(pattern)
    try:
        return re.compile(python)
    except re.error as e:
        raise JavaRegexError(f"{e} (in {pattern!r}, read as Python's {python!r})") from None

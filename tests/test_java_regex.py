"""``subscribePattern`` is a Java regex (Spark's Kafka source compiles it with
``java.util.regex.Pattern``); kafkalog translates it for Python's ``re``. Java itself is the
referee (tests/java/RegexReferee.java): for every pattern, on many topic names, both find the
same topics, and a pattern Java refuses is refused."""

from __future__ import annotations

import random

import pytest

import jvm_referee
from kafkalog.java_regex import JavaRegexError, compile_java

TOPICS = [
    "orders", "orders_archive", "Orders", "ORDERS-2024", "c_gzip", "c_lz4", "c_zstd", "a.b", "aXb",
    "a_b", "my-topic", "my-topic-1", "my_topic", "myXtopic", "x.y_z", "web-2024", "web-", "t1", "T",
    "a", "_a", "__x", "topic.with.dots", "UPPER", "mixedCase99", "0", "9lives", "-", "_", ".",
    "aaaa", "ab", "ba", "abab", "a-b-c", "A-B-C", "abc123", "ABC123", "zzz", "Q", "E", "gzip",
    "payments.eu-west-1", "payments.us_east", "logs-2025.01.31", "k8s.events",
]

# What users write, and the tester's: Java class intersection, quoting, POSIX and Unicode classes.
PATTERNS = [
    r"c_[a-z&&[^g]].*", r"\Qa.b\E", r"c_\p{Lower}+", r"my\h?-topic", r"orders.*", r"web-\d+",
    r"^orders$", r"orders", r"o.*", r"codec-[gs].*|txn|zstd", r".*", r"(?i)orders", r"ORD(?i)ers",
    r"a(?i)b|c", r"[\w&&[^_]]+", r"\p{Upper}{2,}", r"\p{Punct}", r"\P{Alnum}", r"\p{javaLowerCase}+$",
    r"\p{L}+\d", r"\p{IsAlphabetic}\p{IsDigit}", r"\pL\pN", r"\p{Lu}", r"\p{InBasicLatin}+",
    r"[a-c[x-z]]+", r"[^\d]", r"[^a-z&&[^b]]", r"[[a-f]&&[d-z]]", r"(?<name>ab)\k<name>",
    r"(ab)\1", r"x{2,3}+", r"a++b", r"(?>ab|a)b", r"\Qa.b", r"a\E.b", r"\x61\u0062", r"\x{63}_",
    r"\0141", r"\t|a", r"\Aa", r"a\z", r"a\Z", r"\bweb\b", r"\Bb", r"[\Q.-\E]", r"payments\.(eu|us)[-_].*",
    r"logs-\d{4}\.\d{2}\.\d{2}", r"(?i:ORDERS)_archive", r"(?-i)Orders", r"(?x) o r d e r s ",
    r"[a-z&&[def]&&[^e]]+", r"[\p{Lower}&&[^aeiou]]{3}", r"\p{XDigit}+", r"[\s\S]", r"\W",
    r"(?<=a)b", r"(?<!a)b", r"a(?=b)", r"a(?!b)", r"a{2}", r"a{2,}", r"a*?b", r"k8s\.\w+",
    # Java refuses these; so must kafkalog.
    r"[a-", r"(ab", r"ab)", r"*a", r"a{2,1}", r"\y", r"[z-a]", r"a**", r"\p{NoSuchClass}",
]


def random_patterns(n: int, seed: int) -> list:
    rng = random.Random(seed)
    atoms = ["a", "b", "o", "r", "_", "-", r"\.", ".", r"\d", r"\w", r"\W", r"\s", r"\p{Lower}",
             r"\P{Upper}", r"\p{Alnum}", r"\p{Punct}", r"\pL", r"\p{Nd}", r"\Q.-\E", r"\x2e", "T", "Q"]
    classes = ["[a-z]", "[^a-z]", "[A-Z0-9]", "[a-c[x-z]]", "[a-z&&[^aeiou]]", "[\\w&&[^_\\d]]",
               "[._-]", "[^._-]", "[\\p{Alpha}&&[a-m]]", "[^\\p{Lower}&&[^a-c]]", "[\\-a]", "[a-]"]
    quantifiers = ["", "", "", "*", "+", "?", "{1,2}", "{2}", "*?", "+?", "*+", "?+", "{0,3}+"]

    def piece(depth: int) -> str:
        roll = rng.random()
        if roll < 0.45:
            base = rng.choice(atoms)
        elif roll < 0.75:
            base = rng.choice(classes)
        elif depth < 2:
            inner = "|".join(seq(depth + 1) for _ in range(rng.randint(1, 3)))
            # Groups stay unquantified: Java's and Python's engines part ways on a repeated group
            # that can match empty (((\.*+)(\w)*){2}[^a-z] on "a.b"), whatever the syntax.
            return rng.choice(["(", "(?:", "(?i:", "(?>"]) + inner + ")"
        else:
            base = rng.choice(atoms)
        return base + rng.choice(quantifiers)

    def seq(depth: int) -> str:
        parts = [piece(depth) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.15:
            parts.insert(rng.randrange(len(parts) + 1), rng.choice(["(?i)", "(?-i)", "(?s)"]))
        if rng.random() < 0.2:
            parts.insert(0, "^")
        if rng.random() < 0.2:
            parts.append("$")
        return "".join(parts)

    return [seq(0) for _ in range(n)]


def test_topics_picked_as_java_picks_them():
    patterns = PATTERNS + random_patterns(400, seed=20261126)
    cases = [(p, t) for p in patterns for t in TOPICS]
    answers = jvm_referee.run("RegexReferee", [f"{p}\t{t}" for p, t in cases])
    java = {}
    for (p, t), a in zip(cases, answers):
        java.setdefault(p, {})[t] = a
    wrong = []
    translated = 0
    for p, found in java.items():
        refused = set(found.values()) == {"E"}
        try:
            ours = compile_java(p)
        except JavaRegexError as e:
            if not refused:
                wrong.append(f"{p!r}: Java reads it, kafkalog refuses it: {e}")
            continue
        if refused:
            wrong.append(f"{p!r}: Java refuses it, kafkalog reads it")
            continue
        translated += 1
        for t, a in found.items():
            if (ours.search(t) is not None) != (a == "1"):
                wrong.append(f"{p!r} on {t!r}: Java {'finds' if a == '1' else 'does not find'} it")
    assert not wrong, f"{len(wrong)} disagreements with Java:\n" + "\n".join(wrong[:40])
    assert translated > 300


@pytest.mark.parametrize("pattern,why", [
    (r"\X", "not supported"), (r"a\b{g}", "not supported"), (r"\p{IsHan}", "does not know"),
])
def test_what_python_cannot_say_is_refused_with_a_reason(pattern, why):
    with pytest.raises(JavaRegexError, match=why):
        compile_java(pattern)

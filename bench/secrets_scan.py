"""How the credential scan's time grows with adversarial input, as ratios to a linear pass.

    .venv/bin/python bench/secrets_scan.py [--size 1000000] [--rules] [--prefixes]
                                           [--module FILE] [--only NAME]

For each adversarial input (one character class, or a rule's prefix, repeated into one
line) it prints the whole scan's time at ``size`` as a multiple of a trivial linear
regex pass over the same bytes (``ratio``), and time(size) / time(size / 4) (``growth``:
about 4 when linear, 16 when quadratic). ``--rules`` does the same for every rule on its
own, over the character classes (the tests add each rule's own prefixes). ``--prefixes``
adds every rule's prefix, repeated, to the whole scan's inputs. ``--module`` scans with
another copy of secrets.py (e.g. the one before the fix; give it a small ``--size``: it
was super-linear). tests/core/test_secrets_linear.py holds the same bounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import time
from collections.abc import Callable
from types import ModuleType

# The reference: one regex pass that looks at every position and never matches.
REFERENCE = re.compile(r"(?<=[\x00-\x08])\x7f")

CLASSES: dict[str, str] = {
    "word": "a",
    "word-mixed": "aB3_",
    "hex": "0123456789abcdef",
    "base64": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "base64url": "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    "digits": "0123456789",
    "dash": "-",
    "dot": ".",
    "slash": "/",
    "double-quote": '"',
    "single-quote": "'",
    "backtick": "`",
    "equals": "=",
    "colon": ":",
    "equals-colon": "=:",
    "space": " ",
    "tab": "\t",
    "newline": "\n",
    "space-newline": " \n",
    "quote-newline": '"\n',
    "percent": "%41",
    "json-escape": "\\u0041",
    "zero-width": "a\u200b",
    "assign": "a=",
    "assign-quoted": '"a": "',
    "api-key-assign": "api_key=",
    "token-colon": "token: ",
    "key-eq-value": "key=abcdefghijklmnopqrstuvwx&",
    "url-userinfo": "://a:",
    "pem-header": "-----BEGIN PRIVATE KEY-----\n",
    "bearer": "Bearer ",
    "jwt-start-dash": "-eyJ",
    "jwt-parts": "eyJhIjowfQ.e30.",
    "mailchimp-tail": "-us1",
    "npm-auth": "//x/:_authToken=",
    "slack-digits": "xoxb-1-",
    "openai-marker": "T3BlbkFJ",
    "aws-words": "awskey'",
    "telegram": "1234567890:",
    "discord": "M",
    "wrapped-key": "sk-ab\n",
}


def prefixes() -> dict[str, str]:
    """Each rule's keywords and each key start, repeated bare and with a value char."""
    from reef_cli.core import secrets

    words: set[str] = set(secrets._KEY_STARTS)
    for keys in secrets._KEYWORDS.values():
        words.update(keys)
    for _rule, _pattern, keys in secrets._DETECT_SECRETS:
        words.update(keys)
    out: dict[str, str] = {}
    for word in sorted(words):
        for variant in (word, word + "a1"):
            out[f"prefix {variant!r}"] = variant
    return out


def adversarial(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def best(func: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(scan: Callable[[str], object], unit: str, size: int) -> tuple[float, float, float]:
    """(seconds at size, ratio to the reference pass, growth from size/4 to size)."""
    big, small = adversarial(unit, size), adversarial(unit, size // 4)
    reference = best(lambda: REFERENCE.search(big))
    seconds = best(lambda: scan(big), repeats=2)
    growth = seconds / max(best(lambda: scan(small), repeats=2), 1e-9)
    return seconds, seconds / reference, growth


def rule_scanners(module: ModuleType) -> dict[str, Callable[[str], object]]:
    """Every rule on its own over the whole text (no windows), and the normalisers."""
    out: dict[str, Callable[[str], object]] = {}
    for index, (rule, pattern) in enumerate(module._RULES):
        out[f"{index:02d} {rule}"] = lambda t, p=pattern: sum(1 for _ in p.finditer(t))
    for index, (rule, pattern, _keys) in enumerate(module._DETECT_SECRETS):
        out[f"ds{index:02d} {rule}"] = lambda t, p=pattern: sum(1 for _ in p.finditer(t))
    out["assignment"] = lambda t: list(module._assignments(t, 0, len(t), len(t)))
    out["private-key"] = lambda t: list(module._private_keys(t))
    out["views"] = module._views
    return out


def load(path: str | None) -> ModuleType:
    if path is None:
        from reef_cli.core import secrets

        return secrets
    spec = importlib.util.spec_from_file_location("secrets_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rules", action="store_true", help="also time every rule alone")
    parser.add_argument("--module", help="scan with this copy of secrets.py")
    parser.add_argument("--prefixes", action="store_true", help="add every rule's prefix")
    parser.add_argument("--only", help="inputs whose name contains this")
    args = parser.parse_args()
    module = load(args.module)
    inputs = {**CLASSES, **(prefixes() if args.prefixes else {})}
    if args.only:
        inputs = {k: v for k, v in inputs.items() if args.only in k}
    print(f"size {args.size:,} chars; reference: {REFERENCE.pattern!r} over the same text")
    print(f"{'input':28} {'seconds':>8} {'ratio':>7} {'growth':>7}")
    worst = (0.0, 0.0)
    for name, unit in inputs.items():
        seconds, ratio, growth = measure(lambda t: module.scan_text("x.md", t), unit, args.size)
        worst = (max(worst[0], ratio), max(worst[1], growth))
        print(f"{name[:28]:28} {seconds:8.3f} {ratio:7.1f} {growth:7.1f}", flush=True)
    print(f"whole scan: worst ratio {worst[0]:.1f}, worst growth {worst[1]:.1f}")
    if args.rules:
        worst = (0.0, 0.0)
        for rule, scan in rule_scanners(module).items():
            for name, unit in CLASSES.items():
                seconds, ratio, growth = measure(scan, unit, args.size)
                if ratio > worst[0] or growth > worst[1]:
                    print(f"  {rule[:34]:34} {name[:24]:24} {ratio:7.1f} {growth:7.1f}")
                worst = (max(worst[0], ratio), max(worst[1], growth))
        print(f"rules alone: worst ratio {worst[0]:.1f}, worst growth {worst[1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Renders chat templates the way Hugging Face transformers does, as the
reference for hpcrl's C++ Jinja interpreter (tests/chat_template).

Usage: render_reference.py CASES.json
CASES.json is a list of {"template": PATH, "context": {...}}; prints a JSON
list with one {"output": TEXT} or {"error": MESSAGE} per case.

The environment is transformers' (chat_template_utils._compile_jinja_template):
an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension; its tojson (ensure_ascii=False, keys not sorted);
raise_exception; strftime_now, here at a fixed date (26 Jul 2024 12:00) so
renders are reproducible. Needs Debian's python3-jinja2 (run with
/usr/bin/python3).
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2024, 7, 26, 12, 0, 0)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return FIXED_NOW.strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    env = environment()
    compiled = {}
    results = []
    for case in cases:
        path = case["template"]
        try:
            if path not in compiled:
                with open(path, encoding="utf-8") as f:
                    compiled[path] = env.from_string(f.read())
            results.append({"output": compiled[path].render(**case["context"])})
        except Exception as e:  # the C++ side must fail on the same case
            results.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()

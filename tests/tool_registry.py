"""A tool registry for hand-made calls, in the shape a task registers its tools: add (two integers), save (a string
key and an integer value) and code_exec (a string of code)."""

REGISTRY = {"add": {"a": "int", "b": "int"}, "save": {"key": "str", "value": "int"}, "code_exec": {"code": "str"}}

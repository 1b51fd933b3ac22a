"""speclab's error family. Each message is one line that says what to do; the CLI and the lessons
print it instead of a traceback."""


class SpeclabError(Exception):
    """A user-facing error: its message is one line that says what to do."""


class ConfigError(SpeclabError, ValueError):
    """A speculative config that vLLM would refuse or run badly."""


class ServerError(SpeclabError):
    """The server did not start, or died; the message ends with its last log lines."""

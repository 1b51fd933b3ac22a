"""speclab's error family. Each message is one line that says what to do; the CLI and the lessons
print it instead of a traceback (in a notebook, IPython shows ``_render_traceback_``)."""


class SpeclabError(Exception):
    """A user-facing error: its message is one line that says what to do."""

    def _render_traceback_(self) -> list[str]:
        """What IPython (JupyterLab, papermill) shows instead of a traceback: the line, then any notes (the
        log an engine wrote). The traceback says where speclab noticed, which is not what the learner needs."""
        return [f"{type(self).__name__}: {self}", *getattr(self, "__notes__", ())]


class ConfigError(SpeclabError, ValueError):
    """A speculative config that vLLM would refuse or run badly."""


class ServerError(SpeclabError):
    """The server did not start, or died; the message ends with its last log lines."""


def require(ok: bool, message: str) -> None:
    """Refuse with ``message`` (one line that says what to do) unless ``ok``: the checks' one idiom."""
    if not ok:
        raise SpeclabError(message)

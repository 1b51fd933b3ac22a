"""A speclab error raised in a notebook cell shows as its one line (and its notes), not as a traceback:
what a learner sees in JupyterLab, and what a direct papermill run ends with."""

import nbformat
import pytest

from speclab.errors import ConfigError


def test_the_rendered_error_is_its_line_then_its_notes():
    err = ConfigError("k=0: num_speculative_tokens must be at least 1: pass -p k 3")
    assert err._render_traceback_() == ["ConfigError: k=0: num_speculative_tokens must be at least 1: pass -p k 3"]
    err.add_note("vLLM's output is in /tmp/x/vllm.log")
    assert err._render_traceback_()[1:] == ["vLLM's output is in /tmp/x/vllm.log"]


@pytest.mark.notebook
def test_a_notebook_cell_shows_one_line_where_other_errors_keep_their_traceback(tmp_path):
    import papermill

    def run(raise_line: str) -> list[str]:
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell("k = 3", metadata={"tags": ["parameters"]}),
                    nbformat.v4.new_code_cell(f"from speclab.errors import SpeclabError\n\n{raise_line}")]
        nbformat.write(nb, tmp_path / "in.ipynb")
        with pytest.raises(papermill.PapermillExecutionError) as info:
            papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"),
                                       parameters={"k": 0}, progress_bar=False)
        return info.value.traceback  # the error output's lines, as the kernel sent them

    assert run("raise SpeclabError(f'-p k {k}: must be >= 1')") == ["SpeclabError: -p k 0: must be >= 1"]
    assert len(run("raise ValueError(f'k={k}')")) > 1  # anything else: the traceback, for whoever debugs it

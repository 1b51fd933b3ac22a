"""How the lessons read: short "What you should see" sections, takeaways, exercises that say what they need
and come with solutions, and no measured run typed into prose (the stored references print those)."""

import re

import nbformat
import pytest

from speclab.cli.runner import NOTEBOOKS, series

BOOKS = series()
WYSS_MAX_WORDS = 150  # per lesson
WYSS_TOTAL_MAX_WORDS = 2500  # the whole series
NEEDS = re.compile(r"^\*\((CPU, about \d+(-\d+)? min|GPU|GPU, about \d+(-\d+)? min"
                   r"|hours on a CPU; GPU recommended|pen and paper)\)\*")


def sections(book) -> dict[str, list[str]]:
    """The markdown lines under each heading of a lesson, by heading text (lower case, '#' stripped)."""
    found, current = {}, None
    for cell in nbformat.read(book, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        for line in cell.source.splitlines():
            if line.startswith("#"):
                current = line.lstrip("#").strip().lower()
                found.setdefault(current, [])
            elif current is not None:
                found[current].append(line)
    return found


def words(lines: list[str]) -> int:
    return sum(len(line.split()) for line in lines)


def wyss_words(book) -> int:
    return sum(words(lines) for head, lines in sections(book).items() if "what you should see" in head)


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.stem)
def test_what_you_should_see_is_short(book):
    assert 0 < wyss_words(book) <= WYSS_MAX_WORDS, f"{book.name}: {wyss_words(book)} words"


def test_what_you_should_see_stays_short_over_the_series():
    assert sum(wyss_words(b) for b in BOOKS) <= WYSS_TOTAL_MAX_WORDS


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.stem)
def test_each_lesson_closes_with_takeaways(book):
    bullets = [line for line in sections(book).get("key takeaways", []) if line.startswith("- ")]
    assert 3 <= len(bullets) <= 5, f"{book.name}: {len(bullets)} takeaways"


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.stem)
def test_every_exercise_says_what_it_needs_and_has_a_solution(book):
    text = "\n".join(sections(book).get("exercises", []))
    items = re.split(r"^\d+\. ", text, flags=re.M)[1:]
    assert items, f"{book.name}: no numbered exercises under '## Exercises'"
    for i, item in enumerate(items, 1):
        assert NEEDS.match(item.strip()), f"{book.name} exercise {i}: begin with what it needs, *(CPU, about 2 min)*"
        assert "<summary>Solution</summary>" in item and "</details>" in item, f"{book.name} exercise {i}: no solution"


RUN_LOG = re.compile(r"\b(20\d\d-\d\d-\d\d|AVX2|AVX-512|AMX|EPYC|Xeon|H200|H100)\b")


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.stem)
def test_no_run_diary_in_what_you_should_see(book):
    """Dates and machine names belong to the references' own cells and the appendix, not to the lesson."""
    for head, lines in sections(book).items():
        if "what you should see" in head:
            found = RUN_LOG.findall("\n".join(lines))
            assert not found, f"{book.name}: {found}"


def test_the_series_ends_with_the_guide():
    assert BOOKS[-1].name == "16_which_method_when.ipynb" and (NOTEBOOKS / BOOKS[-1].name).is_file()

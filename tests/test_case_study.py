"""Case studies (Figures 4-5): the question whose evidence the methods split most
differently, by a stated rule; per method its handed chunk with the evidence marked and its answer."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from litseg_nb.rag.pipeline import EvalQuestion
from litseg_nb.rag.report import case_study, case_study_html, choose_case_question, plot_case_study
from litseg_nb.core.schema import make_sentence_chunk
from checks import text_overlaps

from conftest import make_book


def test_case_question_is_the_one_the_methods_split_most_differently():
    book = make_book("gutenqa:E", units=1, n=8, dataset="gutenqa")
    u, t = book.units[0], book.text
    sent = lambda i: t[u.sentences[i - 1].start:u.sentences[i - 1].end]  # noqa: E731
    # a: windows 1-4 / 5-8; b: 1-2 / 3-8; c: every sentence alone
    sets = {"a": [make_sentence_chunk(book, u, "a", 0, 1, 4), make_sentence_chunk(book, u, "a", 1, 5, 8)],
            "b": [make_sentence_chunk(book, u, "b", 0, 1, 2), make_sentence_chunk(book, u, "b", 1, 3, 8)],
            "c": [make_sentence_chunk(book, u, "c", i, i + 1, i + 1) for i in range(8)]}
    q_same = EvalQuestion("q1", "gutenqa", book.book_id, book.title, "?", ("x",), sent(1))  # a, b: 1-x ... c: 1
    q_diff = EvalQuestion("q2", "gutenqa", book.book_id, book.title, "?", ("x",), sent(3))  # a 1-4, b 3-8, c 3
    q_none = EvalQuestion("q3", "gutenqa", book.book_id, book.title, "?", ("x",), sent(6))  # a 5-8, b 3-8, c 6
    gen = pd.DataFrame([{"method": m, "qid": q.qid, "answer": f"{m} says", "reference": "x",
                         "contexts": [c.text for c in sets[m][:1]]} for m in sets for q in (q_same, q_diff, q_none)])
    qid, rule = choose_case_question(gen, sets, {book.book_id: book}, [q_same, q_diff, q_none])
    # q1: spans (1-4), (1-2), (1) -> 3 distinct; q2: (1-4), (3-8), (3) -> 3, but more methods miss it; q3: 3, all miss
    assert qid == "q3" and "split most differently (3 distinct" in rule
    case = case_study(gen, qid, [q_same, q_diff, q_none])
    assert [c["method"] for c in case] == ["a", "b", "c"] and not any(c["evidence_handed"] for c in case)
    page = case_study_html(case, "title", rule)
    assert "a says" in page and "<table>" in page
    case1 = case_study(gen, "q1", [q_same, q_diff, q_none])
    a, b = case1[0]["mark"]
    assert case1[0]["evidence_handed"] and case1[0]["chunk"][a:b] == sent(1)
    assert "<mark>" + sent(1) in case_study_html(case1, "t", rule)
    fig = plot_case_study(case1, "t")
    texts = [t.get_text() for t in fig.texts]
    assert [t for t in texts if " — evidence " in t] == ["a — evidence handed", "b — evidence handed",
                                                         "c — evidence handed"]
    assert sum(t.startswith("answer: ") for t in texts) == 3 and "⟦" + sent(1) + "⟧" in " ".join(texts).replace("\n", " ")
    plt.close(fig)


def _long_case(n_methods=3):
    passage = ("She was obliged to stop and think, and she could not but pity them as Harriet described it. ") * 30
    return [{"method": f"m{i}", "chunk": passage, "evidence_handed": False, "mark": None,
             "answer": "The answer concerns her regret over the actions regarding Harriet. " * (2 + 3 * i)}
            for i in range(n_methods)]


def test_case_study_figure_stacks_passage_and_answer_without_overlap():
    """A passage cut to 14 lines plus an answer of several lines: every text sits under the one before
    (the old layout printed the answer line at a fixed axes position, over the passage's last lines)."""
    fig = plot_case_study(_long_case(), "Emma — question q010")
    assert text_overlaps(fig) == []
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in fig.texts]
    assert all(a.y0 >= b.y1 for a, b in zip(boxes, boxes[1:]))  # each block wholly above the next
    fig_box = fig.bbox
    assert all(fig_box.y0 <= b.y0 and b.y1 <= fig_box.y1 for b in boxes)  # the figure is sized to its text
    answers = [t.get_text() for t in fig.texts if t.get_text().startswith("answer: ")]
    assert len(answers) == 3 and answers[-1].count("\n") == 3 and answers[-1].endswith("[…]")  # 4 lines at most
    plt.close(fig)


def test_case_study_avoids_and_names_answers_that_copy_a_prompt_template():
    """A small model copies the prompt's schema placeholder (Lite's subtitle "The subtitle of the plot block")
    into its chunk, and the generator repeats it as the answer: the case study picks a question without such
    an answer where there is one, and says so in one labelled line where it shows one."""
    from litseg_nb.litseg.validate import template_echo

    assert template_echo("The plot block:  the SUBTITLE of the\nplot block The plot: ...") == "the subtitle of the plot block"
    assert template_echo("Emma refuses Mr. Elton.") is None
    book = make_book("gutenqa:E", units=1, n=8, dataset="gutenqa")
    u, t = book.units[0], book.text
    sent = lambda i: t[u.sentences[i - 1].start:u.sentences[i - 1].end]  # noqa: E731
    sets = {"a": [make_sentence_chunk(book, u, "a", 0, 1, 4), make_sentence_chunk(book, u, "a", 1, 5, 8)],
            "c": [make_sentence_chunk(book, u, "c", i, i + 1, i + 1) for i in range(8)]}
    qs = [EvalQuestion(f"q{i}", "gutenqa", book.book_id, book.title, "?", ("x",), sent(i)) for i in (3, 6)]
    echo = "The plot block: The subtitle of the plot block"
    gen = pd.DataFrame([{"method": m, "qid": q.qid, "reference": "x", "contexts": [sets[m][0].text],
                         "answer": echo if (m, q.qid) == ("c", "q6") else f"{m} says"} for m in sets for q in qs])
    qid, rule = choose_case_question(gen, sets, {book.book_id: book}, qs)
    assert qid == "q3" and "no answer copying a prompt template's placeholder" in rule  # q6 split more, but echoes
    only = gen[gen.qid == "q6"]
    qid, rule = choose_case_question(only, sets, {book.book_id: book}, qs)
    assert qid == "q6" and "every one has an answer copying" in rule
    case = case_study(only, qid, qs)
    line = "Template echo (small model): c's answer copies the prompt's placeholder \"the subtitle of the plot block\""
    import html

    assert line in html.unescape(case_study_html(case, "t", rule))
    fig = plot_case_study(case, "t")
    assert any(line in t.get_text().replace("\n", " ") for t in fig.texts)
    assert text_overlaps(fig) == []
    plt.close(fig)

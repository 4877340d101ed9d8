"""Gold narrative boundaries from the books themselves: chapter headings and scene-break ornaments.

Marks are removed and the rest cut into windows of whole paragraphs (units of a derived ``Book``); a window's gold
is the first sentence after every removed mark."""
from __future__ import annotations

import bisect
from collections import Counter
import random
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..chunkers.base import trim_span
from ..core.schema import Book, Sentence, Span, Unit
from ..data.gutenberg import GutenbergFormatError, clean_gutenberg_file
from ..preprocess.gold import GOLD_FILE, load_gold, score_book
from ..preprocess.structure import FRONT_MATTER, build_units
from ..corpus import load_corpus
from ..data.gutenqa import load_gutenqa

KINDS = ("chapter", "scene")
#: version of the rules that make the gold (part of the gold cache key: a rule change rebuilds it)
GOLD_RULES = 2
#: unit title of the derived window books' units
WINDOW_SPLIT = "window"

# ornament glyphs: stars, dashes/rules, section signs, asterisms, fleurons, bullets
_ORNAMENT_CHARS = "*∗✱✲✳⁎⁑-‐‑‒–—―_=~+#•·∙⋅◦○●◆◇❖§⁂❦❧✠✿❀☙"
_ORNAMENT_RE = re.compile(rf"^[{re.escape(_ORNAMENT_CHARS)}]+$")
_SINGLE_GLYPHS = frozenset("§⁂❦❧✠☙❖")
_XXX_RE = re.compile(r"^(?:[xX]\s+){2,}[xX]$")  # "x x x" (never the numeral "XXX": spaces required)


def is_ornament(paragraph: str) -> bool:
    """Whether a whole paragraph is a scene-break ornament (``* * *``, ``§``, ``x x x``, ...)."""
    s = " ".join(paragraph.split())
    if not s or "\n" in paragraph.strip():
        return False
    if _XXX_RE.match(s):
        return True
    compact = s.replace(" ", "")
    single = len(set(compact)) == 1 and compact[0] in _SINGLE_GLYPHS
    return bool(_ORNAMENT_RE.match(compact)) and (len(compact) >= 3 or single)


_CANDIDATE_RE = re.compile(r"[^\W\d_]|\d")  # a letter or a digit


def _candidate(line: str) -> bool:
    s = line.strip()
    return bool(s) and len(s) <= 60 and (not _CANDIDATE_RE.search(s) or bool(_XXX_RE.match(" ".join(s.split()))))


def _words(s: str) -> list[str]:
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch)).casefold()
    return re.sub(r"[\W_]+", " ", s).split()


def _is_run(part: list[str], whole: list[str]) -> bool:
    n = len(part)
    return n > 0 and any(whole[i:i + n] == part for i in range(len(whole) - n + 1))


def heading_paragraphs(text: str, unit: Unit) -> int:
    """How many leading paragraphs of ``unit`` are its heading (their words are a run of its title)."""
    title = _words(unit.title)
    k = 0
    for a, b in unit.paragraphs:
        p = text[a:b]
        if len(p.strip()) > 160 or p.strip().count("\n") > 2:
            break
        w = _words(p)
        if w and not _is_run(w, title):  # a letterless line (a rule under the heading) is part of it
            break
        k += 1
    # then up to three short capitalised lines: a byline, a dedication, a letter's heading, a subtitle
    for a, b in unit.paragraphs[k:k + 3]:
        if not _caps_line(text[a:b]):
            break
        k += 1
    return k


def _caps_line(p: str) -> bool:
    p = p.strip()
    letters = [c for c in p if c.isalpha()]
    return ("\n" not in p and len(p) <= 120 and len(p.split()) <= 16 and len(letters) >= 2
            and sum(c.isupper() for c in letters) >= 0.8 * len(letters))


_NUMERAL_RE = re.compile(r"^(?:[IVXLCDM]+|\d+)\.?$")  # "I", "XIV.", "1818."
_ACT_RE = re.compile(r"^(?:ACT|SCENE|Act|Scene)\b|^[A-Z]+_\d+\|[A-Z]+_\d+$")  # "ACT II.", "ACT_3|SC_1"
_NUMBERED_TITLE_RE = re.compile(r"^[IVXLC]+\.\s+\S.{0,58}$")  # "I. _He Meets a Shy Gentleman_"
_BRACKET_RE = re.compile(r"^\[[^\]]{0,80}\]$")  # "[Picture: The Selfish Giant]", "[Illustration]"


def leftover_heading(paragraph: str) -> bool:
    """Whether a paragraph is heading text a unit's heading left behind (numeral, caps, caption)."""
    lines = [ln.strip() for ln in paragraph.strip().split("\n") if ln.strip()]
    if len(lines) > 1:  # a title block set line by line ("THE LAND OF OZ" / "BY L. FRANK BAUM")
        return (len(lines) <= 4 and all(len(ln) <= 60 for ln in lines)
                and 2 * sum(_caps_line(ln) for ln in lines) >= len(lines))
    p = " ".join(paragraph.split())
    if not p or len(p) > 120:
        return False
    core = p.strip("_*“”\"' ")
    return bool(_NUMERAL_RE.match(core) or _ACT_RE.match(core) or _BRACKET_RE.match(p)
                or (_NUMBERED_TITLE_RE.match(core) and not core.rstrip("_").endswith((".", "?", "!", ","))) or _caps_line(p))


def book_form(kind: str) -> str:
    """The form of a book from the hand-read gold's ``kind``: play, poetry, non-fiction, collection or narrative."""
    k = kind.casefold()
    for form, words in (("play", ("play",)), ("poetry", ("poetry",)), ("non-fiction", ("non-fiction", "essays"))):
        if any(w in k for w in words):
            return form
    if not k.startswith("single") and any(w in k for w in ("stories", "tales", "anthology", "extracts")):
        return "collection"
    return "narrative"


@dataclass(frozen=True)
class StreamParagraph:
    """A kept paragraph of the narrative stream: its span in the source text and its sentences."""

    span: Span
    sentences: tuple[Span, ...]
    unit: int  # index of the source unit
    mark: str | None = None  # "chapter" | "scene": an author's boundary right before this paragraph


@dataclass
class StreamReport:
    """What :func:`narrative_stream` removed and marked in one book."""

    units: int = 0
    heading_paragraphs: int = 0
    ornaments: int = 0  # ornament paragraphs removed
    ornaments_at_edges: int = 0  # at a unit's start or end: removed, no mark
    inline_ornaments: int = 0  # ornament lines inside a longer paragraph: removed, no mark
    chapter_marks: int = 0
    scene_marks: int = 0
    # clean=True: heading text left behind, front matter before a late copy of the heading, back matter
    leftover_headings_removed: int = 0
    front_matter_paragraphs_removed: int = 0
    back_matter_paragraphs_removed: int = 0
    shapes: dict[str, int] = field(default_factory=dict)  # removed ornament shapes


def _late_heading(text: str, unit: Unit, paragraphs: Sequence[Span], limit: int = 12) -> int:
    title = _words(unit.title)
    for i, (a, b) in enumerate(paragraphs[:limit]):
        p = text[a:b].strip()
        if len(p) > 400:
            return 0
        w = _words(p)
        if i and w and len(p) <= 160 and _is_run(w, title) and any(c.isalpha() for c in p):
            return i + 1
    return 0


def _back_matter_start(text: str, paragraphs: Sequence[Span]) -> int:
    for i, (a, b) in enumerate(paragraphs):
        if is_ornament(text[a:b]):
            nxt = [(x, y) for x, y in paragraphs[i + 1:] if not is_ornament(text[x:y])][:6]
            if sum(leftover_heading(text[x:y]) for x, y in nxt) >= 3:
                return i
    return len(paragraphs)


def narrative_stream(text: str, units: Sequence[Unit], report: StreamReport | None = None,
                     clean: bool = True) -> list[StreamParagraph]:
    """The units' paragraphs without headings and ornaments, with chapter/scene marks."""
    rep = report if report is not None else StreamReport()
    out: list[StreamParagraph] = []
    for ui, u in enumerate(units):
        rep.units += 1
        skip = heading_paragraphs(text, u)
        rep.heading_paragraphs += skip
        paras = list(u.paragraphs[skip:])
        if clean:
            late = _late_heading(text, u, paras)
            rep.front_matter_paragraphs_removed += late
            paras = paras[late:]
            if ui == len(units) - 1:  # the book's end: a publisher's advertisement after an ornament
                cut = _back_matter_start(text, paras)
                rep.back_matter_paragraphs_removed += len(paras) - cut
                paras = paras[:cut]
            k = 0
            while k < min(6, len(paras)) and leftover_heading(text[paras[k][0]:paras[k][1]]):
                k += 1
            e = len(paras)
            while e > k and len(paras) - e < 6 and leftover_heading(text[paras[e - 1][0]:paras[e - 1][1]]):
                e -= 1
            rep.leftover_headings_removed += k + len(paras) - e
            paras = paras[k:e]
        starts = [s.start for s in u.sentences]
        kept: list[tuple[Span, tuple[Span, ...], bool]] = []  # (span, sentences, after an ornament)
        pending_scene = False
        after_ornament = 0  # leftover headings removed since the last ornament
        for a, b, inline in _split_inline_ornaments(text, paras, rep):
            if clean and pending_scene and after_ornament < 3 and inline is None and leftover_heading(text[a:b]):
                after_ornament += 1
                rep.leftover_headings_removed += 1
                continue
            if inline is None and is_ornament(text[a:b]):
                after_ornament = 0
                rep.ornaments += 1
                shape = " ".join(text[a:b].split())
                rep.shapes[shape] = rep.shapes.get(shape, 0) + 1
                if kept:
                    pending_scene = True
                else:
                    rep.ornaments_at_edges += 1
                continue
            lo, hi = max(bisect.bisect_right(starts, a) - 1, 0), bisect.bisect_left(starts, b)
            sents = tuple(t for s in u.sentences[lo:hi] if s.end > a and s.start < b
                          for t in [trim_span(text, max(s.start, a), min(s.end, b))] if t)
            if not sents:
                continue  # a paragraph without a sentence (stray punctuation): nothing to segment
            kept.append(((a, b), sents, pending_scene))
            pending_scene = False
        if pending_scene:
            rep.ornaments_at_edges += 1
        for j, (span, sents, scene) in enumerate(kept):
            mark = None
            if j == 0 and out:
                mark = "chapter"
                rep.chapter_marks += 1
            elif scene:
                mark = "scene"
                rep.scene_marks += 1
            out.append(StreamParagraph(span, sents, ui, mark))
    return out


def _split_inline_ornaments(text: str, paragraphs: Sequence[Span], rep: StreamReport):
    for a, b in paragraphs:
        para = text[a:b]
        if "\n" not in para.strip() or not any(is_ornament(ln) for ln in para.split("\n")):
            yield a, b, None
            continue
        pos, start = a, a
        for ln in para.split("\n"):
            if is_ornament(ln):
                rep.inline_ornaments += 1
                if (t := trim_span(text, start, pos)):
                    yield t[0], t[1], True
                start = pos + len(ln)
            pos += len(ln) + 1
        if (t := trim_span(text, start, b)):
            yield t[0], t[1], True


@dataclass(frozen=True)
class Window:
    """Paragraphs ``[first, end)`` of a stream, of one kind, with its marks (stream paragraph indices)."""

    kind: str
    first: int
    end: int
    marks: tuple[int, ...]


def make_windows(stream: Sequence[StreamParagraph], kind: str, window_sentences: int, min_side_sentences: int,
                 rng: random.Random, max_windows: int = 0) -> tuple[list[Window], int]:
    """Non-overlapping windows of ``kind`` over ``stream``; returns (windows, marks skipped)."""
    other = [i for i, p in enumerate(stream) if p.mark and p.mark != kind]
    mine = [i for i, p in enumerate(stream) if p.mark == kind]
    n_sent = [len(p.sentences) for p in stream]
    windows: list[Window] = []
    skipped = 0
    prev_end = 0
    for j in mine:
        if j < prev_end:
            continue  # inside the previous window (counted as its gold)
        if max_windows and len(windows) >= max_windows:
            break
        k = bisect.bisect_right(other, j)
        lo = max(prev_end, other[k - 1] if k else 0)  # a window may start at another kind's mark
        hi = other[k] if k < len(other) else len(stream)  # ... but never cross one
        left_target = rng.randint(min_side_sentences, max(min_side_sentences, window_sentences - min_side_sentences))
        first, left = j, 0
        while first > lo and (left == 0 or left + n_sent[first - 1] <= left_target):
            first -= 1
            left += n_sent[first]
        end, total = j, left
        while end < hi and (end == j or total + n_sent[end] <= window_sentences):
            total += n_sent[end]
            end += 1
        marks = tuple(i for i in range(first + 1, end) if stream[i].mark == kind)
        if left < min_side_sentences or not marks or sum(n_sent[marks[-1]:end]) < min_side_sentences:
            skipped += 1
            continue
        windows.append(Window(kind, first, end, marks))
        prev_end = end
    return windows, skipped


def window_book(source: Book, stream: Sequence[StreamParagraph], windows: Sequence[Window],
                hand_checked: bool) -> Book:
    """A derived :class:`Book` whose units are the windows, gold in ``meta['boundary_gold']``."""
    book_id = f"windows:{source.book_id}"
    pieces: list[str] = []
    pos = 0
    paragraphs: list[Span] = []
    units: list[Unit] = []
    gold: dict[str, dict[str, Any]] = {}
    counters = {k: 0 for k in KINDS}
    for w in windows:
        counters[w.kind] += 1
        uid = f"{w.kind[0]}{counters[w.kind]:04d}"
        if pieces:
            pieces.append("\n\n")
            pos += 2
        u_start = pos
        sents: list[Sentence] = []
        uparas: list[Span] = []
        first_sentence: dict[int, int] = {}
        for i in range(w.first, w.end):
            p = stream[i]
            a, b = p.span
            if i > w.first:
                pieces.append("\n\n")
                pos += 2
            pieces.append(source.text[a:b])
            uparas.append((pos, pos + (b - a)))
            first_sentence[i] = len(sents) + 1
            for sa, sb in p.sentences:
                sents.append(Sentence(len(sents) + 1, pos + sa - a, pos + sb - a))
            pos += b - a
        paragraphs.extend(uparas)
        title = (f"{w.kind} window {counters[w.kind]}: paragraphs {w.first}-{w.end - 1} of the stream, "
                 f"{len(w.marks)} {w.kind} break(s)")
        units.append(Unit(book_id=book_id, unit_id=uid, ordinal=len(units), title=title, start=u_start, end=pos,
                          sentences=tuple(sents), paragraphs=tuple(uparas), split=WINDOW_SPLIT))
        gold[uid] = {"kind": w.kind, "gold": [first_sentence[m] for m in w.marks],
                     "source_spans": [list(stream[i].span) for i in range(w.first, w.end)],
                     "paragraph_starts": [first_sentence[i] for i in range(w.first, w.end)]}
    return Book(book_id=book_id, title=f"{source.title} (boundary windows)", dataset="windows",
                text="".join(pieces), paragraphs=paragraphs, units=units, source=source.source,
                meta={"boundary_gold": gold, "source_book": source.book_id, "hand_checked": hand_checked})


def hand_checked_books(root: Path, sentence_splitter: str = "nupunkt",
                       max_books: int = 0) -> tuple[list[tuple[Book, list[Unit]]], list[dict]]:
    """The hand-read gold books whose detected units match the gold, and a row per gold book."""
    out, rows = [], []
    for entry in load_gold(GOLD_FILE):
        if max_books and len(out) >= max_books:
            break
        bid = f"{entry.file.split('/')[0]}:{Path(entry.file).stem}"
        try:
            cleaned = clean_gutenberg_file(Path(root) / entry.file)
        except (GutenbergFormatError, OSError) as err:
            rows.append({"book_id": bid, "file": entry.file, "used": False, "why": f"unreadable: {err}"})
            continue
        author = getattr(cleaned.report, "author", None)
        units = build_units(bid, cleaned.text, cleaned.paragraphs, max_unit_words=None,
                            sentence_splitter=sentence_splitter, whole_title="@front", author=author)
        units = [u for u in units if not u.title.startswith(FRONT_MATTER)]
        score = score_book(entry, cleaned.text, [(u.title, u.start) for u in units])
        exact = score["matched"] == score["gold_units"] == score["units"]
        why = "" if exact else (f"detected units differ from the hand-read gold (gold {score['gold_units']}, "
                                f"detected {score['units']}, matched {score['matched']})")
        rows.append({"book_id": bid, "file": entry.file, "used": exact, "why": why, "form": book_form(entry.kind)})
        if exact:
            out.append((Book(book_id=bid, title=cleaned.report.title or bid, dataset=entry.file.split("/")[0],
                             text=cleaned.text, paragraphs=cleaned.paragraphs, source=str(Path(root) / entry.file),
                             meta={"form": book_form(entry.kind), "gold_kind": entry.kind}), units))
    return out, rows


def corpus_books(corpus_cfg: Any) -> list[tuple[Book, list[Unit]]]:
    """``[(book, whole narrative units)]`` of a corpus config (units never split recursively)."""
    whole = corpus_cfg.replace(max_unit_words=None, max_units_per_book=0)
    return [(b, [u for u in b.units if not u.title.startswith(FRONT_MATTER)]) for b in load_corpus(whole)]


@dataclass
class GoldSet:
    """The window books and what was found per source book."""

    books: list[Book]
    counts: list[dict[str, Any]]  # one row per source book
    shapes: dict[str, int]  # ornament shapes removed (cleaned text), over the used books


def build_gold(sources: Iterable[tuple[Book, list[Unit]]], window_sentences: int, min_side_sentences: int,
               seed: int, max_windows_per_book: int = 0, hand_checked: bool = True,
               skipped_rows: Sequence[dict] = (), forms: Sequence[str] | None = None, clean: bool = True) -> GoldSet:
    """Windows of both kinds for every source book of a form in ``forms`` (None = all)."""
    books, counts, shapes = [], [], Counter()
    for book, units in sources:
        form = book.meta.get("form", "narrative")
        if forms is not None and form not in forms:
            counts.append({"book_id": book.book_id, "used": False, "form": form,
                           "why": f"form {form!r} left out (BoundaryConfig.forms {tuple(forms)})"})
            continue
        rep = StreamReport()
        stream = narrative_stream(book.text, units, rep, clean=clean)
        rng = random.Random(f"{seed}:{book.book_id}")
        row: dict[str, Any] = {"book_id": book.book_id, "used": True, "form": form, "hand_checked": hand_checked,
                               "units": rep.units, "heading_paragraphs_removed": rep.heading_paragraphs,
                               "leftover_headings_removed": rep.leftover_headings_removed,
                               "front_matter_paragraphs_removed": rep.front_matter_paragraphs_removed,
                               "back_matter_paragraphs_removed": rep.back_matter_paragraphs_removed,
                               "ornaments_removed": rep.ornaments, "ornaments_at_unit_edges": rep.ornaments_at_edges,
                               "inline_ornament_lines_removed": rep.inline_ornaments,
                               "chapter_breaks": rep.chapter_marks, "scene_breaks": rep.scene_marks}
        wins: list[Window] = []
        for kind in KINDS:
            w, skipped = make_windows(stream, kind, window_sentences, min_side_sentences, rng, max_windows_per_book)
            wins.extend(w)
            row[f"{kind}_windows"] = len(w)
            row[f"{kind}_gold"] = sum(len(x.marks) for x in w)
            row[f"{kind}_breaks_skipped_short"] = skipped
        shapes.update(rep.shapes)
        row["shapes"] = ", ".join(f"{s!r}×{n}" for s, n in sorted(rep.shapes.items()))
        counts.append(row)
        if wins:
            wins.sort(key=lambda w: w.first)
            books.append(window_book(book, stream, wins, hand_checked))
    for r in skipped_rows:
        if not r["used"]:
            counts.append({"book_id": r["book_id"], "used": False, "form": r.get("form", ""), "why": r["why"]})
    return GoldSet(books, counts, shapes)


def heading_like_gold(books: Sequence[Book]) -> list[dict[str, Any]]:
    """Gold boundaries whose first sentence is heading text: one row per leak."""
    out = []
    for b in books:
        for u in b.units:
            g = window_gold(b, u.unit_id)
            for i in g["gold"]:
                t = u.sentence_text(b.text, i)
                if leftover_heading(t):
                    out.append({"book_id": b.book_id, "unit_id": u.unit_id, "kind": g["kind"], "sentence": i,
                                "text": " ".join(t.split())[:80]})
    return out


def window_gold(book: Book, unit_id: str) -> dict[str, Any]:
    """The gold of one window unit (``kind``, ``gold`` sentence indices, ``paragraph_starts``)."""
    try:
        return book.meta["boundary_gold"][unit_id]
    except KeyError:
        raise KeyError(f"book {book.book_id!r} unit {unit_id!r} is not a boundary window") from None


def local_book_files(root: Path) -> list[Path]:
    """Every raw local book file: ``gutenberg``, ``gutenberg_dev`` and LiteraryQA's texts (not training)."""
    root = Path(root)
    return (sorted((root / "gutenberg").glob("*.txt")) + sorted((root / "gutenberg_dev").glob("*.txt"))
            + sorted((root / "literaryqa" / "texts").glob("*/*.txt")))


def local_book_texts(root: Path) -> Iterable[tuple[str, str, list[Span]]]:
    """``(book id, cleaned text, paragraphs)`` of every local book and GutenQA's books."""
    root = Path(root)
    for f in local_book_files(root):
        try:
            c = clean_gutenberg_file(f)
        except GutenbergFormatError:
            continue
        yield f"{f.relative_to(root).parts[0]}:{f.stem}", c.text, list(c.paragraphs)
    if (root / "gutenqa" / "GutenQA_paragraphs.parquet").is_file():
        for b in load_gutenqa(root / "gutenqa"):
            yield b.book_id, b.text, list(b.paragraphs)


def ornament_census(texts: Iterable[tuple[str, str, list[Span]]]):
    """Every letterless short line of the books: shape, place, :func:`is_ornament`'s verdict, count."""
    import pandas as pd

    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for bid, text, paragraphs in texts:
        for a, b in paragraphs:
            p = text[a:b]
            lines = [ln for ln in p.split("\n") if ln.strip()]
            alone = len(lines) == 1
            for ln in filter(_candidate, lines):
                shape = " ".join(ln.split())
                where = "paragraph" if alone else "line in a paragraph"
                r = rows.setdefault((shape, where), {"shape": shape, "where": where,
                                                     "scene_break": alone and is_ornament(p), "count": 0,
                                                     "books": set()})
                r["count"] += 1
                r["books"].add(bid)
    out = [{**r, "n_books": len(r["books"]), "books": ", ".join(sorted(r["books"])[:6])
            + (" ..." if len(r["books"]) > 6 else "")} for r in rows.values()]
    cols = ["shape", "where", "scene_break", "count", "n_books", "books"]
    return pd.DataFrame(out, columns=cols).sort_values(["scene_break", "count"], ascending=False,
                                                      ignore_index=True)

"""The handouts (ch12/NN_*.md) keep the shape a student relies on: the opening box (you will learn,
you write, done when, time), at most about 2,500 words of prose (tables, code blocks, figures and
generated blocks not counted), and links that lead somewhere (every relative link of the handouts,
the chapter index, the instructor notes and the READMEs names a file of the tree)."""
import re
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from labcli.student import RELEASE_EXCLUDED  # noqa: E402  (what a student's release leaves out)
HANDOUTS = sorted((ROOT / "ch12").glob("[0-9][0-9]_*.md"))
PROSE_WORDS = 2600  # "at most ~2,500": a little slack, not a second budget
BOX = ("**You will learn**", "**You write**", "**Done when**", "**Time**")


def prose_words(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!-- results:[^>]*:begin -->.*?<!-- results:[^>]*:end -->", "", text, flags=re.S)
    kept = [line for line in text.splitlines()
            if not line.lstrip().startswith(("|", "<!--", "![", "#"))]
    return len(" ".join(kept).split())


def relative_links(text):
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
            yield target.split("#")[0]


class Handouts(unittest.TestCase):
    def test_there_is_one_per_section(self):
        sections = {p.stem for p in (ROOT / "labs").iterdir() if p.suffix in (".cu", ".py")}
        self.assertEqual({p.stem for p in HANDOUTS}, sections)

    def test_each_has_its_second_level_hints(self):
        # ch12/README.md promises hints/NN_<name>.md for every section
        for path in HANDOUTS:
            self.assertTrue((ROOT / "ch12" / "hints" / path.name).exists(), f"ch12/hints/{path.name} is missing")

    def test_the_instructors_notes_link_every_answer_key(self):
        notes = ROOT / "ch12" / "INSTRUCTORS.md"
        if not notes.exists():
            self.skipTest("a student release: no instructor notes")
        linked = set(re.findall(r"\(key/(\d\d_\w+)\.md\)", notes.read_text()))
        self.assertEqual(linked, {p.stem for p in HANDOUTS})

    def test_each_opens_with_the_box(self):
        for path in HANDOUTS:
            box = "\n".join(line for line in path.read_text().splitlines()[:20] if line.startswith(">"))
            for field in BOX:
                self.assertIn(field, box, f"{path.name}: the opening box lacks {field}")

    def test_prose_stays_short(self):
        for path in HANDOUTS:
            n = prose_words(path.read_text())
            self.assertLessEqual(n, PROSE_WORDS, f"{path.name}: {n} words of prose")

    def test_the_counter_counts_prose_only(self):
        text = "# Title\n\nfive words of plain prose\n\n| a | b |\n```\ncode code\n```\n![fig](f.png)\n" \
               "<!-- results:x:begin -->\ngenerated words here\n<!-- results:x:end -->\n"
        self.assertEqual(prose_words(text), 5)

    def test_relative_links_name_files_of_the_tree(self):
        docs = HANDOUTS + [ROOT / "ch12" / "README.md", ROOT / "ch12" / "INSTRUCTORS.md", ROOT / "README.md",
                           ROOT / "results" / "README.md"] + sorted((ROOT / "ch12" / "key").glob("*.md"))
        release = not (ROOT / "solutions").is_dir()  # a student's release: no answers, no instructor notes
        for doc in [d for d in docs if d.exists()]:
            for target in relative_links(doc.read_text()):
                path = (doc.parent / target).resolve()
                left_out = release and str(path.relative_to(ROOT)).startswith(RELEASE_EXCLUDED)  # dead there on purpose
                self.assertTrue(path.exists() or left_out, f"{doc.relative_to(ROOT)}: link to {target}")


if __name__ == "__main__":
    unittest.main()

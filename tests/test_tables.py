"""scripts/tables.py renders what the records say: the right rows and numbers, malformed records
named by field and skipped, the README's and the handouts' tables replaced between their markers
and nowhere else, sections without records named as such."""
import re
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import tables  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "results_sample"


class Tables(unittest.TestCase):
    def test_rows_and_numbers_come_from_the_records(self):
        text, problems, by_section = tables.render(SAMPLE)
        self.assertEqual(list(by_section), ["01_naive"])
        self.assertEqual(len(by_section["01_naive"]), 3)
        # ours: 10.25 ms, 6.7 TFLOP/s = 13% of the 50 TFLOP/s fp32 ceiling; the eager baseline on the same
        # problem took 5.125 ms, so ours runs at 0.50x of the best baseline
        self.assertIn("| kernels | solution | B=1 H=16 T=4096 D=64 fp32 | 10.25 | 6.7 | 425 | 13 | 0.50× (eager) | 2.15 GB | – | pass |", text)
        self.assertIn("| eager | baseline | B=1 H=16 T=4096 D=64 fp32 | 5.125 | 13.4 | 425 | 27 | (baseline) |", text)
        # a record with no baseline on its problem says so instead of inventing a ratio
        self.assertIn("| cublas | solution | B=1 H=16 T=4096 D=64 fp32 causal | 2.77 | 24.8 | 425 | 50 | no library |", text)
        self.assertIn("copy 4250 GB/s", text)
        self.assertIn("# Measured results: NVIDIA H200", text)

    def test_timing_method_is_stated_and_a_record_without_one_is_skipped(self):
        def rec(method):
            return {"timing": {"method": method, "median_ms": 1.0}}
        self.assertEqual(tables.timing_note([rec("queued")]), "Timing: " + tables.TIMING_NOTES["queued"] + ".")
        graphs = tables.timing_note([rec("queued"), rec("cuda-graph")])  # our kernels queued, SDPA from a graph
        self.assertIn(tables.TIMING_NOTES["queued"], graphs)
        self.assertIn("CUDA graph", graphs)
        import json
        with tempfile.TemporaryDirectory() as tmp:
            good = json.loads((SAMPLE / "01_naive.json").read_text())[0]
            old = json.loads(json.dumps(good))
            del old["timing"]["method"]
            Path(tmp, "01_naive.json").write_text(json.dumps([good, old]))
            _, problems, by_section = tables.render(tmp)
        self.assertEqual(len(by_section["01_naive"]), 1)
        self.assertIn("01_naive.json: record 1: field 'timing.method' missing; skipped", problems)

    def test_shape_names_a_mixed_length_batch_and_the_page_size(self):
        base = {"b": 2, "h": 8, "h_kv": 2, "t_q": 1, "t_kv": 100, "d": 128, "dtype": "fp16", "causal": False}
        self.assertEqual(tables.shape({"problem": dict(base, kv_len=[100, 100])}), "B=2 H=8/2 T_q=1 T_kv=100 D=128 fp16")
        self.assertEqual(tables.shape({"problem": dict(base, kv_len=[100, 50], page_size=16)}),
                         "B=2 H=8/2 T_q=1 T_kv=100 D=128 fp16 mixed kv_len (mean 75) page=16")

    def test_quick_smoke_runs_stay_out_of_the_table(self):
        import json
        with tempfile.TemporaryDirectory() as tmp:
            for f in SAMPLE.glob("*.json"):
                shutil.copy(f, tmp)
            good = [r for r in json.loads((SAMPLE / "01_naive.json").read_text()) if "median_ms" in r.get("timing", {})]
            (Path(tmp) / "01_naive.quick.json").write_text(json.dumps(good[:1]))
            _, _, by_section = tables.render(tmp)
        self.assertEqual(len(by_section["01_naive"]), 3)

    def test_kernel_against_kernel_targets(self):
        def rec(section, variant, ms, page=None, sha="abc", kv_len=None):
            return {"section": section, "variant": variant, "build": "solution", "git_sha": sha,
                    "problem": {"b": 8, "h": 32, "h_kv": 8, "t_q": 1, "t_kv": 4096, "d": 128, "dtype": "fp16",
                                "causal": False, "page_size": page, "kv_len": kv_len},
                    "check": {"passed": True}, "timing": {"median_ms": ms}, "metrics": {"tflops": 1.0}}
        mixed = [4096, 100, 2000, 7, 4096, 1, 3000, 50]
        records = [rec("05_decode", "split", 0.100), rec("06_paged", "split", 0.104, page=16),
                   rec("06_paged", "split", 0.090, page=32),  # not the target's page size: no row
                   rec("05_decode", "split", 0.050, kv_len=mixed),  # a mixed batch sorts beside equal lengths
                   rec("06_paged", "split", 0.100, page=16, kv_len=mixed),
                   rec("08_tma_skeleton", "ws", 2.0), rec("08_tma_skeleton", "paged", 2.5, page=64),
                   rec("08_tma_skeleton", "paged-pool", 2.1, page=64)]
        text = tables.comparison_table(records)
        self.assertIn("mixed kv_len (mean 1669) page=16 | 0.1 | 0.05 | 0.50× | ≥ 0.95× | **no** |", text)
        self.assertIn("| 08 paged-pool (page >= 64) vs 08 ws | B=8 H=32/8 T_q=1 T_kv=4096 D=128 fp16 page=64 | 2.1 | 2 | "
                      "0.95× | ≥ 0.90× | yes |", text)
        # 0.100 / 0.104 = 0.96 >= 0.95: met; ws / paged = 2.0 / 2.5 = 0.80 < 0.9: not met
        self.assertIn("| 06 paged (page 16) vs 05, same logical cache | B=8 H=32/8 T_q=1 T_kv=4096 D=128 fp16 page=16 | "
                      "0.104 | 0.1 | 0.96× | ≥ 0.95× | yes |", text)
        self.assertIn("| 08 paged (page >= 64) vs 08 ws | B=8 H=32/8 T_q=1 T_kv=4096 D=128 fp16 page=64 | 2.5 | 2 | "
                      "0.80× | ≥ 0.90× | **no** |", text)
        self.assertNotIn("page=32", text)
        self.assertNotIn("04 mma", text)  # no 04 record: no row, not a made-up one
        self.assertIsNone(tables.comparison_table(records[:1]))
        # 08 against 04 is a target for T >= 4096 only: a T = 1024 pair gets no row
        short, long_ = rec("08_tma_skeleton", "ws", 1.0), rec("08_tma_skeleton", "ws", 1.0)
        short["problem"].update(t_q=1024, t_kv=1024)
        long_["problem"].update(t_q=4096, t_kv=4096)
        mma_short, mma_long = rec("04_fp16", "mma", 0.9), rec("04_fp16", "mma", 1.5)
        mma_short["problem"].update(t_q=1024, t_kv=1024)
        mma_long["problem"].update(t_q=4096, t_kv=4096)
        text = tables.comparison_table([short, long_, mma_short, mma_long])
        self.assertIn("| 08 ws vs 04 mma (T >= 4096) | B=8 H=32/8 T=4096 D=128 fp16 | 1 | 1.5 | 1.50× | ≥ 1.00× | yes |", text)
        self.assertNotIn("T=1024", text)

    def test_a_tagged_side_study_gets_its_own_table_and_stays_out_of_the_sweep(self):
        import json
        with tempfile.TemporaryDirectory() as tmp:
            for f in SAMPLE.glob("*.json"):
                shutil.copy(f, tmp)
            good = [r for r in json.loads((SAMPLE / "01_naive.json").read_text()) if "median_ms" in r.get("timing", {})]
            side = dict(good[0], variant="kernels-ablated")
            (Path(tmp) / "01_naive.ablation.json").write_text(json.dumps([side]))
            text, _, by_section = tables.render(tmp)
            sweep, study = text.split("### Study `ablation` (`01_naive.ablation.json`)")
            self.assertNotIn("kernels-ablated", sweep)
            self.assertIn("| kernels-ablated | solution |", study)
            readme = Path(tmp) / "README.md"
            readme.write_text(f"x\n{tables.README_BEGIN}\n{tables.README_END}\ny\n")
            tables.update_readme(readme, by_section, "sample")
            self.assertNotIn("kernels-ablated", readme.read_text())

    def test_an_ablation_run_is_named_by_the_block_and_tile_it_forced(self):
        def rec(metrics):
            return {"variant": "ws-pingpong", "metrics": metrics}
        self.assertEqual(tables.variant_label(rec({"block_kv": 176, "block_kv_default": 176})), "ws-pingpong")
        self.assertEqual(tables.variant_label(rec({"block_kv": 128, "block_kv_default": 176})),
                         "ws-pingpong --kv-tile 128")
        self.assertEqual(tables.variant_label(rec({"consumers": 2, "consumers_default": 3, "block_kv": 128,
                                                   "block_kv_default": 128})), "ws-pingpong --consumers 2")
        self.assertEqual(tables.variant_label(rec({"block_kv": 128})), "ws-pingpong")  # a record from before the option

    def test_roofline_bends_at_the_ridge(self):
        import plots
        # 4 TB/s and 800 TFLOP/s: the slope meets the top at 200 FLOP/byte
        self.assertEqual(plots.roof(800, 4.0), [(0.1, 0.4), (200.0, 800.0), (1e4, 800)])
        self.assertEqual(len(plots.roof(800, 4.0, lo=1e3)), 2)  # ridge outside the range: no bend point

    def test_malformed_records_and_files_are_named_and_skipped(self):
        _, problems, _ = tables.render(SAMPLE)
        self.assertIn("01_naive.json: record 3: field 'timing.median_ms' missing; skipped", problems)
        self.assertTrue(any(p.startswith("02_broken.json: not valid JSON") for p in problems))
        self.assertFalse(any("ceilings.json" in p for p in problems))

    def test_measured_dram_bytes_appear_beside_the_model(self):
        import json
        with tempfile.TemporaryDirectory() as tmp:
            for f in SAMPLE.glob("*.json"):
                shutil.copy(f, tmp)
            rec = json.loads((SAMPLE / "01_naive.json").read_text())[0]
            key = list(tables.problem_key(rec))
            Path(tmp, "ncu.json").write_text(json.dumps([{"section": "01_naive", "variant": "kernels", "problem_key": key,
                                                         "dram_bytes": 4.5e9}]))
            text, _, _ = tables.render(Path(tmp))
            self.assertIn("| 4.5 GB / 4.36 GB |", text)

    def test_a_dram_measurement_belongs_to_its_run_settings(self):
        """05's split-count study runs one variant on one problem with 2, 3, 4, 8 splits: a DRAM
        measurement taken with 2 belongs to that row only (all four showed it once)."""
        import json
        rec = json.loads((SAMPLE / "01_naive.json").read_text())[0]
        runs = []
        for splits in (2, 4):
            r = json.loads(json.dumps(rec))
            r["metrics"]["splits"] = splits
            runs.append(r)
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "ncu.json").write_text(json.dumps([{"section": "01_naive", "variant": "kernels", "label": "kernels",
                                                         "splits": 2, "problem_key": list(tables.problem_key(rec)),
                                                         "dram_bytes": 4.5e9}]))
            _, ncu = tables.load_side_files(tmp)
        self.assertEqual(ncu.get(tables.dram_key(runs[0])), 4.5e9)
        self.assertIsNone(ncu.get(tables.dram_key(runs[1])))
        self.assertIsNone(ncu.get(tables.dram_key(rec)))  # a run without a split count is another run

    def test_plots_are_drawn_from_the_records_that_exist(self):
        import plots
        records, _ = tables.load_records(SAMPLE)
        ceilings, _ = tables.load_side_files(SAMPLE)
        with tempfile.TemporaryDirectory() as tmp:
            made, notes = plots.render_all(records, Path(tmp), ceilings)
            names = sorted(p.name for p in made)
            if notes and notes[0].startswith("matplotlib not installed"):
                self.skipTest(notes[0])
            # the sample has prefill records of 01 (with extra memory) and ceilings: those three plots
            self.assertEqual(names, ["memory_vs_t.png", "prefill_tflops.png", "roofline.png"])
            for p in made:
                self.assertGreater(p.stat().st_size, 10000)
                self.assertEqual(p.read_bytes()[:8], b"\x89PNG\r\n\x1a\n")
            self.assertIn("plot 'decode bandwidth': no records for it yet", notes)

    def test_readme_table_is_replaced_between_markers_only(self):
        _, _, by_section = tables.render(SAMPLE)
        with tempfile.TemporaryDirectory() as tmp:
            readme = Path(tmp, "README.md")
            readme.write_text(f"intro\n{tables.README_BEGIN}\nold table\n{tables.README_END}\noutro\n")
            tables.update_readme(readme, by_section, "h200")
            text = readme.read_text()
            self.assertTrue(text.startswith("intro\n"))
            self.assertTrue(text.endswith("\noutro\n"))
            self.assertNotIn("old table", text)
            # one row per section: the headline (the problem with a library: kernels, not cublas causal)
            self.assertIn("| 01_naive | kernels | B=1 H=16 T=4096 D=64 fp32 | 10.25 | 6.7 TFLOP/s | 0.50× eager |", text)
            tables.update_readme(readme, by_section, "h200", sections={"09_triton"})
            self.assertIn("| 09_triton | no records yet | | | | |", readme.read_text())
            readme.write_text("no markers")
            with self.assertRaises(SystemExit):
                tables.update_readme(readme, by_section, "h200")


    def test_sliding_window_table_against_plain_causal_and_the_ideal(self):
        # 07 records (their own folder: the main sample's tests count its sections): T = 8192, W = 4096
        # took 0.62 ms, the same kernel with no window 0.8 ms: 0.775 of it, where the FLOP ratio
        # (T·W - W²/2) / (T²/2) is 0.75, so 1.03x the ideal; full 1.6 ms = 2.58x window; FlexAttention
        # 0.55 ms = 0.89x ours. At T = 16384 no `full` record: a dash, not a made-up ratio.
        self.assertAlmostEqual(tables.ideal_window_ratio(8192, 4096), 0.75)
        self.assertAlmostEqual(tables.ideal_window_ratio(4096, 4096), 1.0)
        self.assertAlmostEqual(tables.ideal_window_ratio(4096, 5000), 1.0)  # W > T is plain causal
        text, problems, _ = tables.render(SAMPLE / "sliding_window")
        self.assertEqual(problems, [])
        self.assertIn("| window | B=1 H=16 T=8192 D=128 bf16 causal | 4096 | 0.62 | 0.8 | 0.775 | 0.750 | 1.03 | 1.6 | 2.58 | 0.55 | 0.89× |", text)
        self.assertIn("| window | B=1 H=16 T=16384 D=128 bf16 causal | 4096 | 1.3 | 2.9 | 0.448 | 0.438 | 1.02 | – | – | 1.4 | 1.08× |", text)
        # only windowed runs of ours get a row: not the plain-causal run, not `full`, not a baseline
        self.assertEqual(text.count("| 4096 | "), 2)

    def drawn_series(self, fn, *args):
        """{label: points} of every series (ours, libraries, references) plots.fn would draw; skips
        without matplotlib."""
        import plots
        try:
            plt = plots._plt()
        except ImportError:
            self.skipTest("matplotlib not installed")
        drawn = {}

        def capture(plt_, ours, libraries, *rest, refs=None, **kw):
            for group in (ours, libraries, refs or {}):
                for label, pts in group.items():
                    self.assertNotIn(label, drawn)  # no series drawn twice
                    drawn[label] = pts
        real_draw = plots._draw
        plots._draw = capture
        try:
            with tempfile.TemporaryDirectory() as tmp:
                self.assertIsNotNone(fn(*args[:1], Path(tmp), plt, *args[1:]))
        finally:
            plots._draw = real_draw
        for label in drawn:  # a section prefix or "library:" on every label
            self.assertRegex(label, r"^(\d\d |library: )", label)
        return drawn

    def test_decode_plot_draws_one_line_per_section_and_each_library_once(self):
        import plots

        def rec(section, variant, build, gbps, page=None, t_kv=4096, b=8):
            return {"section": section, "variant": variant, "build": build, "problem": {
                    "b": b, "h": 32, "h_kv": 8, "t_q": 1, "t_kv": t_kv, "d": 128, "dtype": "fp16",
                    "causal": False, "page_size": page}, "check": {"passed": True},
                    "timing": {"median_ms": 1000 / gbps}, "metrics": {"hbm_gbps": gbps, "tflops": 0.1}}
        records = [rec("05_decode", "split", "solution", 4000), rec("05_decode", "single", "solution", 3000),
                   rec("05_decode", "sdpa-cudnn", "baseline", 3900), rec("05_decode", "split", "solution", 4400, t_kv=8192),
                   rec("05_decode", "sdpa-cudnn", "baseline", 4300, t_kv=8192),
                   rec("06_paged", "split", "solution", 3800, page=16), rec("06_paged", "sdpa-cudnn", "baseline", 3950)]
        drawn = self.drawn_series(plots.decode_bandwidth, records, None)
        # the headline variant of each section (split), the library once, its faster time where two
        # sections measured it on the same problem; `single` only in the tables
        self.assertEqual(sorted(drawn), ["05 split B=8", "06 split B=8 page=16", "library: sdpa-cudnn B=8"])
        self.assertEqual(drawn["library: sdpa-cudnn B=8"], [(4096, 3950), (8192, 4300)])

    def test_sliding_window_plot_has_the_ideal_line_and_prefixes(self):
        import plots
        records, _ = tables.load_records(SAMPLE / "sliding_window")
        drawn = self.drawn_series(plots.window_time, records)
        ideal = drawn["07 ideal W=4096: causal time x (T·W - W²/2) / (T²/2)"]
        self.assertEqual([t for t, _ in ideal], [8192, 16384])
        self.assertAlmostEqual(ideal[0][1], 0.8 * 0.75)
        self.assertIn("07 window causal, no window", drawn)
        self.assertIn("library: flex W=4096", drawn)
        self.assertNotIn("07 full W=4096", drawn)  # the other variants are in the tables

    def test_prefill_plot_draws_each_library_once_across_sections(self):
        import copy
        import plots
        records, _ = tables.load_records(SAMPLE)
        eager = next(r for r in records if r["build"] == "baseline")
        sdpa = copy.deepcopy(eager)
        sdpa["variant"] = "sdpa-efficient"
        again = copy.deepcopy(sdpa)
        again["section"] = "03_v2_loop_order"
        again["timing"]["median_ms"] = 4.0
        drawn = self.drawn_series(plots.prefill_ladder, records + [sdpa, again])
        self.assertEqual(sorted(drawn), ["01 kernels (fp32)", "library: sdpa-efficient (fp32)"])

    def test_memory_plot_names_the_zero_byte_sections_instead_of_inventing_a_floor(self):
        import copy
        import plots
        records, _ = tables.load_records(SAMPLE)
        flash = copy.deepcopy(next(r for r in records if r["variant"] == "kernels"))
        flash.update(section="03_v2_loop_order", variant="v2")
        flash["metrics"]["extra_device_bytes"] = 0
        drawn = self.drawn_series(plots.memory_vs_t, records + [flash])
        self.assertIn("01 kernels", drawn)
        self.assertFalse(any(k.startswith("03") for k in drawn))  # 0 B: named in a note, not drawn at a floor
        self.assertTrue(all(y > 0 for pts in drawn.values() for _, y in pts))

    def test_the_hopper_window_gets_the_same_window_table(self):
        import copy
        records, _ = tables.load_records(SAMPLE / "sliding_window")
        as_08 = []
        for r in records:
            if r["variant"] in ("window", "flex") and r["problem"]["t_q"] == r["problem"]["t_kv"]:
                o = copy.deepcopy(r)
                o.update(section="08_tma_skeleton", variant="ws" if r["variant"] == "window" else "flex")
                as_08.append(o)
        text = "\n".join(tables.render_group("08_tma_skeleton", "", as_08, None, {}))
        self.assertIn("08's Hopper kernel with 07's tile skip", text)
        self.assertIn("| ws | B=1 H=16 T=16384 D=128 bf16 causal | 4096 | 1.3 | 2.9 | 0.448 | 0.438 | 1.02 | – | – | 1.4 | 1.08× |", text)

    def test_handout_regions_get_the_sections_table_and_nothing_else_changes(self):
        _, _, by_section = tables.render(SAMPLE)
        with tempfile.TemporaryDirectory() as tmp:
            marked = Path(tmp, "01_naive.md")
            marked.write_text("# 01\n\ntext before\n<!-- results:01_naive:begin -->\nstale table\n"
                              "<!-- results:01_naive:end -->\ntext after\n"
                              "<!-- results:09_triton:begin -->\n<!-- results:09_triton:end -->\n")
            plain = Path(tmp, "README.md")
            plain.write_text("no markers here\n")
            before = plain.stat().st_mtime_ns
            changed = tables.update_handouts(tmp, by_section)
            text = marked.read_text()
            self.assertEqual(changed, [marked])
            self.assertNotIn("stale table", text)
            self.assertTrue(text.startswith("# 01\n\ntext before\n<!-- results:01_naive:begin -->\n"))
            self.assertIn("<!-- results:01_naive:end -->\ntext after\n", text)
            # the compact table: one row per problem, ours against the fastest library
            self.assertIn("| shape | cublas ms | kernels ms | best of ours | best library ms | library / ours |", text)
            self.assertIn("| B=1 H=16 T=4096 D=64 fp32 |  | 10.25 | 6.7 TFLOP/s (kernels) | 5.125 (eager) | 0.50× |", text)
            self.assertIn("| B=1 H=16 T=4096 D=64 fp32 causal | 2.77 |  | 24.8 TFLOP/s (cublas) | – | – |", text)
            self.assertIn("<!-- results:09_triton:begin -->\n\nNo records yet.\n\n<!-- results:09_triton:end -->", text)
            self.assertEqual(plain.read_text(), "no markers here\n")
            self.assertEqual(plain.stat().st_mtime_ns, before)
            self.assertEqual(tables.update_handouts(tmp, by_section), [])  # a second pass changes nothing

    def test_precision_table_sets_two_precisions_of_one_problem_side_by_side(self):
        import json
        base = json.loads((SAMPLE / "01_naive.json").read_text())[0]
        def rec(variant, rule, err, bound, l2, t=4096):
            r = json.loads(json.dumps(base))
            r.update(section="08_tma_skeleton", variant=variant)
            r["problem"].update(t_q=t, t_kv=t, dtype="bf16", d=128)
            r["check"].update(rule=rule, max_abs_err=err, ref_err_bound=bound, rel_l2_err=l2)
            return r
        bf16, e4m3 = "2x unfused bf16", "2x unfused fp32 on e4m3-quantised inputs"
        records = [rec("ws", bf16, 0.002, 0.004, 0.001), rec("ws-overlap", bf16, 0.002, 0.004, 0.001),
                   rec("fp8", e4m3, 0.03, 0.05, 0.02), rec("ws", bf16, 0.001, 0.004, 0.001, t=1024)]
        text = tables.precision_table(records)
        self.assertIn("| shape | ws max error | ws bound | ws rel L2 | fp8 max error | fp8 bound | fp8 rel L2 | fp8 / ws max error |", text)
        self.assertIn("| B=1 H=16 T=4096 D=128 bf16 | 0.002 | 0.004 | 0.001 | 0.03 | 0.05 | 0.02 | 15.0× |", text)
        self.assertNotIn("T=1024", text)  # one precision only: nothing to compare
        self.assertEqual(tables.precision_table(records[:2]), tables.NO_RECORDS)
        # the lower precision measured more often still comes second: its error is the price
        more_fp8 = [rec("fp8", e4m3, 0.03, 0.05, 0.02, t=1024), rec("fp8", e4m3, 0.03, 0.05, 0.02, t=512)] + records
        self.assertIn("| B=1 H=16 T=4096 D=128 bf16 | 0.002 | 0.004 | 0.001 | 0.03 | 0.05 | 0.02 | 15.0× |",
                      tables.precision_table(more_fp8))
        with tempfile.TemporaryDirectory() as tmp:
            marked = Path(tmp, "08.md")
            marked.write_text("<!-- results:08_tma_skeleton:precision:begin -->\nstale\n<!-- results:08_tma_skeleton:precision:end -->\n")
            tables.update_handouts(tmp, {"08_tma_skeleton": records})
            self.assertIn("15.0×", marked.read_text())
            self.assertNotIn("stale", marked.read_text())
            # a study's region reads only that study's records (NN_name.tag.json)
            studied = [dict(r, _tag="fp8", check=dict(r["check"], max_abs_err=r["check"]["max_abs_err"] * 2))
                       for r in records if r["variant"] in ("ws", "fp8")]
            marked.write_text("<!-- results:08_tma_skeleton.fp8:precision:begin -->\nstale\n"
                              "<!-- results:08_tma_skeleton.fp8:precision:end -->\n")
            tables.update_handouts(tmp, {"08_tma_skeleton": records + studied})
            self.assertIn("| 0.004 | 0.004 | 0.001 | 0.06 |", marked.read_text())
            self.assertNotIn("stale", marked.read_text())

    def test_sections_without_records_are_listed(self):
        text, _, _ = tables.render(SAMPLE, sections={"01_naive", "10_flex"})
        self.assertIn("## 10_flex\n\nNo records yet.", text)
        self.assertIn("## 01_naive", text)

    def test_best_library_is_the_fastest_known_library(self):
        def rec(variant, build, ms):
            return {"section": "04_fp16", "variant": variant, "build": build, "check": {"passed": True},
                    "problem": {"b": 1, "h": 8, "h_kv": 8, "t_q": 512, "t_kv": 512, "d": 64, "dtype": "bf16",
                                "causal": False}, "timing": {"median_ms": ms}, "metrics": {"tflops": 1.0}}
        ours = rec("mma", "solution", 1.0)
        libs = [rec("sdpa-flash", "baseline", 1.5), rec("fa4", "baseline", 0.8), rec("mystery", "baseline", 0.1)]
        self.assertEqual(tables.best_baseline(ours, libs), (0.8, "fa4"))  # "mystery" is not a known library
        self.assertEqual(set(tables.LIBRARIES), {"sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math", "eager",
                                                 "flex", "fa4", "flashinfer"})

    def test_a_section_timed_against_another_sections_kernel_is_summed_up_by_its_own(self):
        def rec(variant, ms, joined=False):
            metrics = {"tflops": 10.0 / ms}
            if joined:
                metrics["kernel_of"] = "07_sliding_window"
            return {"section": "10_flex", "variant": variant, "build": "solution", "check": {"passed": True},
                    "problem": {"b": 1, "h": 16, "h_kv": 16, "t_q": 8192, "t_kv": 8192, "d": 128, "dtype": "bf16",
                                "causal": True, "window": 4096}, "timing": {"median_ms": ms}, "metrics": metrics}
        records = [rec("window", 2.0), rec("07-window", 1.5, joined=True)]
        self.assertEqual(tables.headline("10_flex", records)["variant"], "window")  # 07's kernel is not 10's
        # a lab kernel is not a library: the README's "vs best library" cell says there is none, and names
        # the kernel it was timed against as a lab kernel
        self.assertEqual(tables.vs_library(records[0], records),
                         "no library on this shape; 0.75× 07-window (lab kernel, section 07_sliding_window)")
        table = tables.readme_table(["10_flex"], {"10_flex": records})
        self.assertIn("| no library on this shape; 0.75× 07-window (lab kernel, section 07_sliding_window) |", table)

    def test_a_named_library_gets_its_own_column_beside_the_fastest(self):
        def rec(variant, build, ms):
            return {"section": "09_triton", "variant": variant, "build": build, "check": {"passed": True},
                    "problem": {"b": 1, "h": 8, "h_kv": 8, "t_q": 4096, "t_kv": 4096, "d": 64, "dtype": "bf16",
                                "causal": False}, "timing": {"median_ms": ms, "graph_median_ms": ms}, "metrics": {"tflops": 1.0}}
        records = [rec("triton", "solution", 2.0), rec("sdpa-flash", "baseline", 3.0), rec("sdpa-cudnn", "baseline", 1.6)]
        rows = tables.compact_table(records, ("sdpa-flash",)).splitlines()
        self.assertTrue(rows[0].endswith("| library / ours | sdpa-flash / ours |"))
        self.assertTrue(rows[2].endswith("| 1.6 (sdpa-cudnn) | 0.80× | 1.50× |"), rows[2])

    def test_a_library_launched_without_a_graph_is_marked_eager(self):
        def rec(variant, build, ms, timing=None):
            return {"section": "05_decode", "variant": variant, "build": build, "check": {"passed": True},
                    "problem": {"b": 8, "h": 32, "h_kv": 8, "t_q": 1, "t_kv": 1024, "d": 128, "dtype": "fp16",
                                "causal": False}, "timing": dict(timing or {}, median_ms=ms), "metrics": {"tflops": 1.0}}
        ours = rec("split", "solution", 0.01)
        eager = rec("flashinfer", "baseline", 0.06, {"method": "queued"})
        chose_eager = rec("flashinfer", "baseline", 0.02, {"method": "queued", "graph_median_ms": 0.03})
        self.assertTrue(tables.compact_table([ours, eager], ("flashinfer",)).splitlines()[2].endswith("| 6.00× (eager) |"))
        self.assertTrue(tables.compact_table([ours, chose_eager], ("flashinfer",)).splitlines()[2].endswith("| 2.00× |"))
        # a backward is never graph-replayed and needs no such mark
        mine, fa2 = rec("wgmma", "solution", 4.0), rec("sdpa-flash", "baseline", 3.8, {"method": "queued"})
        for r in (mine, fa2):
            r["metrics"]["pass"] = "backward"
        self.assertTrue(tables.compact_table([mine, fa2], ("sdpa-flash",)).splitlines()[2].endswith("| 0.95× | 0.95× |"))

    def test_another_sections_program_in_a_study_is_a_column_of_the_study(self):
        import json
        def rec(section, variant, build, ms):
            return {"schema_version": 1, "section": section, "variant": variant, "build": build, "git_sha": "abc",
                    "check": {"passed": True}, "command": "x",
                    "problem": {"b": 1, "h": 16, "h_kv": 16, "t_q": 4096, "t_kv": 4096, "d": 128, "dtype": "bf16",
                                "causal": False, "window": None, "page_size": None},
                    "timing": {"method": "queued", "median_ms": ms}, "metrics": {"tflops": 1.0, "extra_device_bytes": 0},
                    "gpu": {"name": "G", "slug": "g"}, "time_utc": "t"}
        with tempfile.TemporaryDirectory() as tmp:
            study = [rec("09_triton", "triton", "solution", 2.0), rec("04_fp16", "mma", "solution", 3.0),
                     rec("08_tma_skeleton", "ws", "solution", 1.5), rec("09_triton", "sdpa-flash", "baseline", 2.5)]
            Path(tmp, "09_triton.exercise4.json").write_text(json.dumps(study))
            records, problems = tables.load_records(tmp)
            self.assertEqual(problems, [])
            self.assertEqual({r["section"] for r in records}, {"09_triton"})  # no rows under 04 or 08
            self.assertEqual(sorted(r["variant"] for r in records), ["04 mma", "08 ws", "sdpa-flash", "triton"])
            head, _, row = tables.compact_table(records).splitlines()
            self.assertIn("| 04 mma ms |", head)
            self.assertIn("(08 ws)", row)

    def test_backward_is_compared_with_backward_and_forward_plus_backward_stays_beside(self):
        import json

        def rec(variant, build, ms, pass_name=None, causal=False):
            metrics = {"tflops": None if ms is None else 10.0 / ms, "extra_device_bytes": 0}
            if pass_name:
                metrics["pass"] = pass_name
            return {"schema_version": 1, "section": "11_backward", "variant": variant, "build": build,
                    "git_sha": "abc1234", "check": {"passed": ms is not None},
                    "problem": {"b": 4, "h": 16, "h_kv": 16, "t_q": 4096, "t_kv": 4096, "d": 128, "dtype": "bf16",
                                "causal": causal},
                    "timing": {"method": "queued", "median_ms": ms}, "metrics": metrics}
        records = [rec("atomic", "solution", 2.0, "backward"),
                   rec("deterministic", "solution", 2.5),  # a record from before the field: the backward
                   rec("sdpa-flash", "baseline", 3.0, "backward"), rec("sdpa-cudnn", "baseline", 1.6, "backward"),
                   rec("sdpa-cudnn", "baseline", 1.0, "forward+backward"),  # faster than any backward: never the ratio
                   rec("sdpa-flash", "baseline", 4.0, "forward+backward"), rec("fa4", "baseline", None, "backward"),
                   rec("atomic", "solution", 1.5, "backward", causal=True)]  # no library measured causal
        self.assertEqual(tables.best_baseline(records[0], records[2:]), (0.8, "sdpa-cudnn"))
        self.assertEqual(tables.best_baseline(records[1], records[2:]), (1.6 / 2.5, "sdpa-cudnn"))
        self.assertEqual([tables.pass_of(r) for r in records[:5]],
                         ["backward", "backward", "backward", "backward", "forward+backward"])
        self.assertFalse(any(tables.is_library(r) for r in records))  # a forward plot draws none of them
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "11_backward.json").write_text(json.dumps(records))
            text, problems, by_section = tables.render(tmp)
        self.assertEqual(problems, [])
        compact = tables.compact_table([r for r in by_section["11_backward"] if tables.is_timed(r)])
        self.assertIn("| shape | atomic backward ms | deterministic backward ms | best of ours (backward) | "
                      "best library backward ms | library / ours (backward) | libraries' forward+backward ms |", compact)
        self.assertIn("| B=4 H=16 T=4096 D=128 bf16 | 2 | 2.5 | 5 TFLOP/s (atomic) | 1.6 (sdpa-cudnn) | 0.80× | "
                      "1 (sdpa-cudnn) / 4 (sdpa-flash) |", compact)
        self.assertIn("| B=4 H=16 T=4096 D=128 bf16 causal | 1.5 |  | 6.67 TFLOP/s (atomic) | – | – | – |", compact)
        self.assertIn("| atomic (backward) | solution | B=4 H=16 T=4096 D=128 bf16 | 2 | 5 | – | – | 0.80× (sdpa-cudnn) |", text)
        self.assertIn("| sdpa-cudnn (forward+backward) | baseline | B=4 H=16 T=4096 D=128 bf16 | 1 |", text)
        self.assertIn("| fa4 (backward) | baseline | B=4 H=16 T=4096 D=128 bf16 | – |", text)
        self.assertIn("2.5× the forward's FLOPs", text)
        self.assertEqual(tables.headline("11_backward", by_section["11_backward"])["variant"], "atomic")

    @staticmethod
    def full_record(section, variant, build, ms, problem=None, metrics=None, command=None, time_utc="2026-01-01T00:00:00Z",
                    rule="2x unfused bf16"):
        p = {"b": 1, "h": 16, "h_kv": 16, "t_q": 16384, "t_kv": 16384, "d": 128, "dtype": "bf16", "causal": True,
             "window": None, "page_size": None}
        p.update(problem or {})
        return {"schema_version": 1, "section": section, "variant": variant, "build": build, "git_sha": "abc",
                "check": {"passed": True, "rule": rule}, "problem": p, "time_utc": time_utc,
                "command": command or f"bin/{section} --variant {variant} --json out.json --b 1 --t 16384 --causal",
                "timing": {"method": "queued", "median_ms": ms},
                "metrics": dict({"tflops": 1.0 / ms, "extra_device_bytes": 0}, **(metrics or {})), "gpu": {"name": "G"}}

    def test_a_study_shows_the_setting_its_runs_differ_by(self):
        # 05's split-count study: one variant on one problem at several split counts; the count is a
        # column (planned by the program, forced by --splits, or capped below what --splits asked)
        import json
        decode = {"b": 1, "h": 32, "h_kv": 8, "t_q": 1, "t_kv": 32768, "causal": False, "dtype": "fp16"}
        cmd = "bin/05_decode --variant split --json x.json --t 1 --t-kv 32768"
        study = [self.full_record("05_decode", "split", "solution", 0.044, decode, {"splits": 16, "splits_forced": False},
                                  cmd),
                 self.full_record("05_decode", "split", "solution", 0.052, decode, {"splits": 8, "splits_forced": True},
                                  cmd + " --splits 8"),
                 self.full_record("05_decode", "split", "solution", 0.048, decode, {"splits": 32, "splits_forced": True},
                                  cmd + " --splits 33")]
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "05_decode.split-count.json").write_text(json.dumps(study))
            text, problems, _ = tables.render(tmp)
        self.assertEqual(problems, [])
        table = text.split("### Study `split-count`")[1]
        self.assertIn("| variant | build | shape | splits | median ms |", table)
        rows = [line for line in table.splitlines() if line.startswith("| split |")]
        self.assertEqual([row.split(" | ")[3] for row in rows], ["8", "16 (planned)", "32 (--splits 33)"])  # in order

    def test_fp8_has_no_bf16_ceiling_and_stays_out_of_16_bit_comparisons(self):
        e4m3 = "2x unfused fp32 on e4m3-quantised inputs, P in e4m3"
        ws = self.full_record("08_tma_skeleton", "ws-pingpong", "solution", 1.6, metrics={"tflops": 690.0})
        fp8 = self.full_record("08_tma_skeleton", "fp8", "solution", 1.3, metrics={"tflops": 846.0}, rule=e4m3)
        fa4 = self.full_record("08_tma_skeleton", "fa4", "baseline", 1.5, metrics={"tflops": 733.0})
        ceilings = {"copy_gbps": 4000.0, "fp32_gemm_tflops": 50.0, "bf16_gemm_tflops": 785.0}
        self.assertIsNone(tables.ceiling_pct(fp8, ceilings))  # no fp8 ceiling measured: not 108% of bf16's
        self.assertEqual(tables.operand_precision(fp8), "fp8")
        self.assertAlmostEqual(tables.ceiling_pct(ws, ceilings), 100 * 690 / 785)
        every = tables.section_table([ws, fp8, fa4], ceilings)
        self.assertIn("| fp8 | solution | B=1 H=16 T=16384 D=128 bf16 causal | 1.3 | 846 | – | – | 1.15× (fa4; fp8 against bf16) |",
                      every)
        self.assertIn("| ws-pingpong | solution | B=1 H=16 T=16384 D=128 bf16 causal | 1.6 | 690 | – | 88 | 0.94× (fa4) |", every)
        # the sweep's row: best of ours and the library ratio are the 16-bit kernel's, and say so
        head, _, row = tables.compact_table([ws, fp8, fa4]).splitlines()
        self.assertIn("| best of ours (16-bit) | best library ms (16-bit) | library / ours (16-bit) |", head)
        self.assertTrue(row.endswith("| 690 TFLOP/s (ws-pingpong) | 1.5 (fa4) | 0.94× |"), row)
        # a study of fp8 sets it against both, labelled: 1.6 / 1.3 and 1.5 / 1.3
        head, _, row = tables.compact_table([ws, fp8, fa4], low_precision_columns=True).splitlines()
        self.assertIn("| fp8 against 16-bit: best of ours / fp8 | fp8 against the library: library / fp8 |", head)
        self.assertTrue(row.endswith("| 0.94× | 1.23× (ws-pingpong, bf16) | 1.15× (fa4, bf16) |"), row)
        # and is never the section's headline
        self.assertEqual(tables.headline("08_tma_skeleton", [ws, fp8, fa4])["variant"], "ws-pingpong")

    def test_a_run_measured_twice_is_one_record_the_newer(self):
        # 08's ws on one shape from two bench entries whose options are in another order: one record,
        # the newer, one cell and one kernel-against-kernel row; a library timed twice: its faster time.
        # Runs told apart only by their metrics (12's ranks: its command line does not show them) stay apart.
        import json
        older = self.full_record("08_tma_skeleton", "ws", "solution", 1.8603, time_utc="2026-12-03T13:32:55Z",
                                 command="bin/08 --variant ws --json a.json --b 1 --t 16384 --h 16 --d 128 --causal")
        newer = self.full_record("08_tma_skeleton", "ws", "solution", 1.8593, time_utc="2026-12-03T13:39:23Z",
                                 command="bin/08 --variant ws --json b.json --b 1 --h 16 --d 128 --t 16384 --causal")
        spec = 'scripts/baselines.py --spec {"variants":["fa4"],"b":1,"causal":true}'
        libs = [self.full_record("08_tma_skeleton", "fa4", "baseline", ms, command=spec) for ms in (1.502, 1.469)]
        mma = self.full_record("04_fp16", "mma", "solution", 3.329)
        rings = [self.full_record("12_ring", "ring", "solution", 2.0, metrics={"ranks": n, "layout": "zigzag"})
                 for n in (2, 4)]
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "08_tma_skeleton.json").write_text(json.dumps([older] + libs + [newer]))
            Path(tmp, "04_fp16.json").write_text(json.dumps([mma]))
            Path(tmp, "12_ring.json").write_text(json.dumps(rings))
            records, problems = tables.load_records(tmp)
            text, _, by_section = tables.render(tmp)
        self.assertEqual(problems, [])
        ws = [r for r in records if r["variant"] == "ws"]
        self.assertEqual([r["timing"]["median_ms"] for r in ws], [1.8593])
        self.assertEqual([r["timing"]["median_ms"] for r in records if r["variant"] == "fa4"], [1.469])
        self.assertEqual(len(by_section["12_ring"]), 2)
        compact = tables.compact_table(by_section["08_tma_skeleton"])
        self.assertIn("| B=1 H=16 T=16384 D=128 bf16 causal | 1.859 |", compact)
        self.assertEqual(text.count("| 08 ws vs 04 mma (T >= 4096) |"), 1)
        self.assertEqual(tables.command_options(older["command"]), tables.command_options(newer["command"]))

    def test_every_timing_method_is_explained(self):
        # the Python sections' "events" (labharness/run.py) is said in words, as queued and cuda-graph are
        for method in ("queued", "cuda-graph", "events"):
            note = tables.timing_note([{"timing": {"method": method, "median_ms": 1.0}}])
            self.assertNotIn("method '", note)
            self.assertEqual(note, "Timing: " + tables.TIMING_NOTES[method] + ".")
        self.assertIn("Python", tables.TIMING_NOTES["events"])

    def test_generated_text_names_no_session_run_or_call(self):
        import re
        text, _, _ = tables.render(SAMPLE)
        text += "\n".join(tables.TIMING_NOTES.values())
        import plots
        text += "\n".join(a + " " + c for a, c in plots.CAPTIONS.values())
        self.assertIsNone(re.search(r"\b(session|sessions|call \d+|run \d+|issue)\b", text, re.I))


class Command(unittest.TestCase):
    def test_run_writes_tables_plots_with_captions_readme_and_handouts(self):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp, "h200")
            shutil.copytree(SAMPLE, folder)
            readme = Path(tmp, "README.md")
            readme.write_text(f"x\n{tables.README_BEGIN}\n{tables.README_END}\n")
            handouts = Path(tmp, "ch12")
            handouts.mkdir()
            Path(handouts, "01_naive.md").write_text("<!-- results:01_naive:begin -->\n<!-- results:01_naive:end -->\n")
            said = []
            self.assertEqual(tables.run(folder, readme, handouts, say=said.append), 0)
            text = Path(folder, "TABLES.md").read_text()
            self.assertIn("| 01_naive | kernels |", readme.read_text())
            self.assertIn("| B=1 H=16 T=4096 D=64 fp32 |", Path(handouts, "01_naive.md").read_text())
            if Path(folder, "prefill_tflops.png").exists():  # (matplotlib installed)
                import plots
                alt, caption = plots.CAPTIONS["prefill_tflops.png"]
                self.assertIn(f"![{alt}](prefill_tflops.png)\n\n{caption}", text)

    def test_bad_folder_or_readme_is_one_line_and_exit_2(self):
        import subprocess
        script = ROOT / "scripts" / "tables.py"
        r = subprocess.run([sys.executable, str(script), "--results", "/nonexistent/results"], capture_output=True, text=True)
        self.assertEqual((r.returncode, len(r.stdout.strip().splitlines()), r.stderr), (2, 1, ""))
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(SAMPLE, Path(tmp, "h200"))
            Path(tmp, "README.md").write_text("no markers\n")
            r = subprocess.run([sys.executable, str(script), "--results", str(Path(tmp, "h200")), "--readme",
                                str(Path(tmp, "README.md")), "--handouts", tmp], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("has no results markers", r.stdout)
            self.assertNotIn("Traceback", r.stderr)


class RingTable(unittest.TestCase):
    """12_ring: ranks, layout and transport are options, not variants: one row per record, each
    with its own columns (a compact table would merge them into one row of the problem)."""

    def record(self, ranks, layout, transport, eff_key, eff):
        return {"schema_version": 1, "section": "12_ring", "variant": "ring", "build": "solution",
                "problem": {"b": 1, "h": 16, "h_kv": 16, "t_q": 16384, "t_kv": 16384, "d": 128, "dtype": "bf16",
                            "causal": True, "window": None, "page_size": None},
                "check": {"passed": True}, "timing": {"median_ms": 2.0 * ranks},
                "metrics": {"ranks": ranks, "layout": layout, "transport": transport, "kernel": "hopper (wgmma)", "ring_ms": 1.5,
                            "compute_ms": 1.4, "transfer_ms": 0.2, "overlap": 0.5, "work_max_over_mean": 1.71,
                            eff_key: eff}}

    def test_the_single_gpu_time_is_shown_and_every_column_defined(self):
        # efficiency is the single-GPU forward's time over the ring's: 1.2 / 1.5 = 0.80; that time is in
        # the table (not the record's median, 8 ms, the "forward ms"), and each column has its line
        r = self.record(4, "zigzag", "local", "sharding_efficiency", 0.8)
        r["metrics"]["single_gpu_ms"] = 1.2
        text = tables.ring_table([r])
        head, _, row = text.splitlines()[:3]
        self.assertIn("| forward ms | single-GPU ms | ring ms |", head)
        self.assertIn("| 8 | 1.2 | 1.5 | 1.4 | 0.2 | 50% | 1.71 | 0.80 | pass |", row)
        for name in ["forward ms", "single-GPU ms", "ring ms", "compute ms", "pass ms", "pass hidden",
                     "work max/mean", "efficiency"]:
            self.assertIn(f"| {name} |", head)
            self.assertRegex(text, rf"\n- \*\*{re.escape(name)}\*\*: [^\n]+")
        self.assertIn("single-GPU ms / ring ms", text)

    def test_the_summary_is_one_run_per_cell_and_the_headline_a_ring(self):
        # seven runs of one problem are seven rows (not seven times in one cell), each naming its
        # ranks, layout and transport; the README's headline is never the one-rank run, which passes nothing
        import json
        runs = [self.record(n, layout, "local", "sharding_efficiency", 0.5) for n, layout in
                ((1, "contiguous"), (2, "contiguous"), (2, "zigzag"), (4, "zigzag"))]
        for r in runs:
            r["timing"]["median_ms"] = 1.0 + r["metrics"]["ranks"] / 10  # the one-rank run fastest
            r["metrics"]["tflops"], r["metrics"]["extra_device_bytes"] = 100 / r["timing"]["median_ms"], 0
            r.update(git_sha="abc", command="12_ring --variant ring --causal --t 16384", gpu={"name": "G"})
            r["timing"]["method"] = "queued"
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "12_ring.json").write_text(json.dumps(runs))
            records, problems = tables.load_records(tmp)  # the same command line: told apart by the metrics
            self.assertEqual((len(records), problems), (4, []))
            text, _, by_section = tables.render(tmp)
        compact = text.split("One row per problem")[1].split("Every record")[0]
        self.assertNotRegex(compact, r"\d / \d")  # no cell of several runs' times
        self.assertIn("| shape | ranks | layout | transport | ring ms |", compact)
        self.assertIn("| B=1 H=16 T=16384 D=128 bf16 causal | 1 | contiguous | local | 1.1 |", compact)
        self.assertIn("| B=1 H=16 T=16384 D=128 bf16 causal | 2 | zigzag | local | 1.2 |", compact)
        h = tables.headline("12_ring", by_section["12_ring"])
        self.assertEqual(h["metrics"]["ranks"], 2)
        self.assertIn("| 12_ring | ring (2 ranks, contiguous, local) |", tables.readme_table(["12_ring"], by_section))

    def test_one_row_per_record(self):
        rows = [line for line in tables.ring_table([self.record(4, "contiguous", "local", "sharding_efficiency", 0.8),
                                                    self.record(8, "zigzag", "nccl", "scaling_efficiency", 0.93)]
                                                   ).splitlines() if line.startswith("|")]
        self.assertEqual(len(rows), 4)
        self.assertIn("| ring (hopper) | 4 | contiguous | local | 8 |", rows[2])
        self.assertIn("| 50% | 1.71 | 0.80 | pass |", rows[2])
        self.assertIn("| 8 | zigzag | nccl | 16 |", rows[3])
        self.assertIn("| 0.93 | pass |", rows[3])

    def test_handout_region_uses_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = Path(tmp, "12_ring.md")
            md.write_text("x\n<!-- results:12_ring:begin -->\n<!-- results:12_ring:end -->\n")
            tables.update_handouts(tmp, {"12_ring": [self.record(2, "zigzag", "local", "sharding_efficiency", 0.7)]})
            self.assertIn("| 2 | zigzag | local |", md.read_text())


if __name__ == "__main__":
    unittest.main()

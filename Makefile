.PHONY: run test check lint samples compat-samples golden bench pipelines pipelines-wide

run:        ## install (first time) and start the app
	bash scripts/start.sh
test:       ## install (first time) and run every test
	bash scripts/test.sh
lint:
	.venv/bin/python -m ruff check . && .venv/bin/python -m ruff format --check .
check: lint test
	.venv/bin/python -m mypy statelens  # every module: statelens/ links the layers
samples:    ## regenerate the sample checkpoints (runs real streaming queries)
	.venv/bin/python sample_checkpoints/generate.py
compat-samples:  ## checkpoints of PySpark 3.4-4.3 (one venv per version under ~/.cache/statelens-compat)
	.venv/bin/python sample_checkpoints/generate.py --spark all
golden:     ## Spark's reads of every sample, for the native reader's equality test (done by the two above)
	.venv/bin/python sample_checkpoints/generate.py --golden

pipelines:  ## the suite's generated pipelines again (sample_checkpoints/generated: runs each for real)
	cd tests && PYTHONPATH=..:. ../.venv/bin/python -m pipegen generate $$(ls ../sample_checkpoints/generated | tr '\n' ,) --out ../sample_checkpoints/generated.new
pipelines-wide:  ## many generated pipelines run and checked (SEEDS=1000-1199): right / wrong / crashed per part
	cd tests && PYTHONPATH=..:. ../.venv/bin/python -m pipegen wide --seeds $${SEEDS:-1000-1199} --work /tmp/pipegen-wide --table /tmp/pipegen-wide.md

bench:      ## benchmarks (the first run builds the 1M- and 5M-key checkpoints, several minutes)
	.venv/bin/python bench/bench_native.py
	.venv/bin/python bench/bench_app_why_missing.py
	.venv/bin/python bench/bench_overview.py
	.venv/bin/python bench/bench_why_missing.py
	.venv/bin/python bench/bench_lookup.py
	.venv/bin/python bench/bench_load.py
	.venv/bin/python bench/bench_formats.py
	.venv/bin/python bench/bench_remote.py
	.venv/bin/python bench/bench_gate.py
	.venv/bin/python bench/bench_big_state.py

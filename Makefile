# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need.
CARGO ?= cargo

.PHONY: deps build release demo test compat lint fmt bench-core bench-smoke bench-all clean

deps:
	@bash scripts/install-deps

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p slotgate

# A local 3-master, 1-replica Redis Cluster with the proxy in front; Ctrl-C stops both.
demo: deps release
	./target/release/slotgate demo

# Unit, property and real-cluster integration tests (free ports, no fixed port assumed),
# then the redis-py compatibility run.
test: deps
	$(CARGO) test --workspace
	$(MAKE) --no-print-directory compat

# redis-py's plain client against the debug proxy and a local 3-master cluster, every command
# family compared with the owning master (scripts/compat_redis_py.py, docs/commands.md).
compat: deps
	$(CARGO) build -p slotgate
	python3 scripts/compat_redis_py.py

# What CI checks besides the tests.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	python3 scripts/modcycles.py crates/proxy/src

fmt:
	$(CARGO) fmt --all

# CPU per request of slotgate vs nutcracker -v 4 vs Redis direct, pinned, interleaved.
bench-core: deps release
	python3 scripts/bench_core.py

# The load generator's own cost against redis-benchmark, quickly (a smoke run).
bench-smoke: deps release
	./target/release/slotgate bench selfcheck --reps 2

# Every benchmark behind BENCHMARKS.md (about 30 minutes; results under results/all-*).
bench-all: deps
	bash scripts/bench-all

clean:
	$(CARGO) clean

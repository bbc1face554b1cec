# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need.
CARGO ?= cargo

.PHONY: deps build release demo test lint fmt bench-core clean

deps:
	@bash scripts/install-deps

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p slotgate

# A local 3-master, 1-replica Redis Cluster with the proxy in front; Ctrl-C stops both.
demo: deps release
	./target/release/slotgate demo

# Unit, property and real-cluster integration tests (free ports, no fixed port assumed).
test: deps
	$(CARGO) test --workspace

# What CI checks besides the tests.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# CPU per request of slotgate vs nutcracker -v 4 vs Redis direct, pinned, interleaved.
bench-core: deps release
	python3 scripts/bench_core.py

clean:
	$(CARGO) clean

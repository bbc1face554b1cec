# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need.
CARGO ?= cargo

.PHONY: deps build release demo test compat compat-all difftest soak faults lint fmt bench-core bench-smoke bench-all clean

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
# then the redis-py compatibility run and the differential test.
test: deps
	$(CARGO) test --workspace
	$(MAKE) --no-print-directory compat
	$(MAKE) --no-print-directory difftest

# redis-py's plain client against the debug proxy and a local 3-master cluster, every command
# family compared with the owning master (scripts/compat_redis_py.py, docs/commands.md); then
# the real-client suite (compat/run.py, docs/clients.md): redis-py, go-redis, ioredis,
# node-redis, Jedis, Lettuce, hiredis and redis-rs in their plain and cluster modes, RESP2
# and RESP3. Pinned dependencies come from scripts/install-compat-deps (cached in ~/.m2, ~/.npm,
# GOMODCACHE, ~/.cargo). About 2.5 minutes, plus about 1.5 for the redis-rs build in a clean
# clone (compat/rust/target) and up to a minute of downloads on a machine that has none cached.
# Then the proxy group's failover run (scripts/group_failover.py, docs/group.md): JedisCluster
# under load over 3 proxies, one killed; about 25 s.
compat: deps
	$(CARGO) build -p slotgate
	python3 scripts/compat_redis_py.py
	bash scripts/install-compat-deps
	python3 compat/run.py
	python3 scripts/group_failover.py

# The real-client suite with every language it has, also any left out of `make test` for time
# (none today: compat/run.py DEFAULT_LANGS).
compat-all: deps
	$(CARGO) build -p slotgate
	bash scripts/install-compat-deps
	python3 compat/run.py --langs all

# Differential test (scripts/difftest.py, docs/difftest.md): random seeded pipelined scripts
# through the proxy vs one standalone redis-server, byte for byte; about 100 s plain, then
# 30 s while slots move live and masters fail over, then 45 s (about 55 s with set-up and the
# final checks) while masters are killed -9 and restarted, paused, failed over and have their
# connections killed (scripts/faultinject.py: a script a fault overlapped may differ and is
# counted apart; the proxy's fds must not grow). The seed is random and printed; a
# failure prints a shrunk reproduction and its rerun line.
# No family is skipped, with chaos or without. Under chaos, a WATCH the proxy cannot vouch
# for after its slot moved makes EXEC answer nil, where one Redis (which never moves a slot)
# runs the transaction (documented in docs/commands.md): such a script is counted apart
# ("lost their WATCH to chaos"), every other reply is compared.
DIFFTEST_SKIP ?=
DIFFTEST_CHAOS_SKIP ?=
difftest: deps
	$(CARGO) build -p slotgate
	python3 scripts/difftest.py --seconds 100 --quiet --shrink-budget 60 $(if $(DIFFTEST_SKIP),--skip-families $(DIFFTEST_SKIP))
	python3 scripts/difftest.py --seconds 30 --chaos --quiet --shrink-budget 30 $(if $(DIFFTEST_CHAOS_SKIP),--skip-families $(DIFFTEST_CHAOS_SKIP))
	python3 scripts/difftest.py --seconds 45 --faults --fault-every 6 --quiet --shrink-budget 30

# Every family, for as long as asked: make soak SECONDS=3600 [CHAOS=1] [FAULTS=1] [FAMILIES=a,b] [JOBS=4]
# (or SCRIPTS=10000 instead of SECONDS). JOBS copies, each with its own cluster and seed, overlap
# their waits: one copy keeps a core about 15% busy. FAULTS=1 adds hard faults on real nodes
# (kill -9 + restart, SIGSTOP/CONT, CLIENT KILL of the proxy's connections, failover; every
# 8 s on average, scripts/faultinject.py) and prints the proxy's fds and RSS before and after.
SECONDS ?= 600
JOBS ?= 1
soak: deps
	$(CARGO) build -p slotgate
	python3 scripts/difftest.py $(if $(SCRIPTS),--scripts $(SCRIPTS),--seconds $(SECONDS)) --jobs $(JOBS) --quiet $(if $(CHAOS),--chaos) $(if $(FAULTS),--faults) $(if $(FAMILIES),--families $(FAMILIES))

# The fault catalogue (docs/faults.md): every scenario through the proxy and directly, one
# report row each, in results/faults.md. About 1.5 minutes.
faults:
	rm -f results/faults.md
	FAULTS_REPORT=$(CURDIR)/results/faults.md $(CARGO) test -p proxy --test faults_catalogue --test faults_relay -- --test-threads=1
	@cat results/faults.md

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

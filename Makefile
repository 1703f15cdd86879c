# pg_tenure: PGXS build and tests

EXTENSION = pg_tenure
MODULE_big = pg_tenure
OBJS = src/tenure.o src/state.o src/txn.o src/keeper.o src/lease.o src/durable.o src/fence.o src/observe.o
DATA = pg_tenure--0.1.sql
PGFILEDESC = "pg_tenure - leases, leader election and fencing epochs"

PG_CPPFLAGS = -Isrc
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror $(EXTRA_CFLAGS)

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

# the libpq example clients, used by the demo and the tests
all: examples
.PHONY: examples
examples:
	$(MAKE) -C examples PG_CONFIG=$(PG_CONFIG)

# every object sees the shared structs
$(OBJS): src/pg_tenure.h src/compat.h

# Sourced by test/run.sh, demo/run.sh and bench/run.sh: which PostgreSQL
# major to build and test against.
#
#   PG_MAJOR=17 bash test/run.sh     # inside a Debian 13 system or chroot
#
# PG_MAJOR defaults to the major the running Debian ships (12: 15, 13: 17,
# unstable: the newest server package apt knows), or to the major of
# PG_CONFIG if that is given.  PG_CONFIG defaults to Debian's pg_config of
# that major.  Sets PG_MAJOR, PG_CONFIG and PG_BIN.

tenure_debian_major() {
	local codename
	codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	case $codename in
		bookworm) echo 15 ;;
		trixie) echo 17 ;;
		*)
			apt-cache search --names-only '^postgresql-[0-9]+$' 2>/dev/null |
				sed -n 's/^postgresql-\([0-9][0-9]*\) .*/\1/p' | sort -n | tail -1
			;;
	esac
}

if [ -z "${PG_MAJOR:-}" ] && [ -n "${PG_CONFIG:-}" ]; then
	PG_MAJOR=$("$PG_CONFIG" --version | sed -n 's/^PostgreSQL \([0-9][0-9]*\).*/\1/p')
fi
PG_MAJOR=${PG_MAJOR:-$(tenure_debian_major)}
if [ -z "$PG_MAJOR" ]; then
	echo "$(basename "$0"): cannot tell which PostgreSQL major to use; set PG_MAJOR" >&2
	exit 2
fi
PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/$PG_MAJOR/bin/pg_config}
PG_BIN=$(dirname "$PG_CONFIG")
export PG_MAJOR PG_CONFIG

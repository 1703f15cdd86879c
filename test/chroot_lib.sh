# shellcheck shell=bash
# Sourced by test/chroot.sh and test/package.sh: create a Debian chroot
# with debootstrap, and bind-mount what PostgreSQL needs inside it.
#
#   tenure_chroot_create ROOT SUITE MIRROR   # debootstrap once, then reuse
#   tenure_chroot_mount ROOT                 # proc sys dev dev/pts dev/shm
#   tenure_chroot_unmount ROOT               # in reverse order; for a trap
#
# As root.  tenure_chroot_unmount never fails, so that an EXIT trap calling
# it cannot change the exit status of the script.

tenure_chroot_mounts=(proc sys dev dev/pts dev/shm)

tenure_chroot_unmount() {
	local root=$1 i m
	for ((i = ${#tenure_chroot_mounts[@]} - 1; i >= 0; i--)); do
		m=$root/${tenure_chroot_mounts[i]}
		if mountpoint -q "$m" 2>/dev/null; then
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		fi
	done
	return 0
}

tenure_chroot_mount() {
	local root=$1 m
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	for m in "${tenure_chroot_mounts[@]}"; do
		mkdir -p "$root/$m"
		mountpoint -q "$root/$m" || mount --bind "/$m" "$root/$m"
	done
}

# Create ROOT once with debootstrap --variant=minbase; the marker
# ROOT/.pg_tenure-ready says debootstrap finished, so that a chroot left
# half-made by an interrupted run is made again.
tenure_chroot_create() {
	local root=$1 suite=$2 mirror=$3
	[ ! -f "$root/.pg_tenure-ready" ] || return 0
	command -v debootstrap >/dev/null || {
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
	}
	tenure_chroot_unmount "$root"
	rm -rf --one-file-system "$root"
	echo "$(basename "$0"): debootstrap $suite into $root"
	debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
		tail -n 40 "$root.debootstrap.log"
		return 1
	}
	# unstable's Release file may be past its Valid-Until
	if [ "$suite" = sid ] || [ "$suite" = unstable ]; then
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99pg-tenure"
	fi
	touch "$root/.pg_tenure-ready"
}

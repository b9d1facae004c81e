# Shared by the scripts: find Go, refuse to run without root, build emu.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/go/bin:/root/go/bin"
command -v go >/dev/null || { echo "Go is not installed (want Go >= 1.26 on PATH or in /usr/local/go)" >&2; exit 1; }
need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "$(basename "$0") builds network namespaces: run it as root (or with sudo)" >&2
		exit 1
	fi
}
build_emu() {
	mkdir -p bin
	go build -o bin/emu ./emu
}

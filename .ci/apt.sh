# .ci/apt.sh - sourced by the CI scripts (from the repository root): Debian packages, quietly, as
# root or through sudo. `ci_install PKG...` refreshes the package lists and installs PKG.
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" != 0 ] && SUDO=sudo
ci_install() {
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "$@" > /dev/null
}

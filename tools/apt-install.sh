# Sourced by tools/quickstart.sh and tools/fuzz.sh: apt_install_missing NAME PACKAGE... installs, as root on
# Debian, those of the packages not yet installed (quietly, without recommends), naming them first as
# "NAME: installing ..."; nothing happens when all are installed, so a second run costs a dpkg query each.
apt_install_missing() {
  local name=$1 p
  shift
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "$name: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

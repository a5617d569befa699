#!/usr/bin/env bash
# The bash completion (scripts/bash-completion/hoprelay), sourced into bash and driven as bash
# drives it (COMP_WORDS, COMP_CWORD, then the completion function): it is registered for both
# commands, completes subcommands, option values and node names from the topology, and offers
# every option that `--help` of each command and subcommand lists.
#   tests/completion/test_completion.sh BUILD_DIR
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$1
fail() {
  echo "FAIL: $*"
  exit 1
}
# shellcheck source=../../scripts/bash-completion/hoprelay
source "$src/scripts/bash-completion/hoprelay"

[[ $(complete -p hoprelay) == "complete -o filenames -F _hoprelay hoprelay" ]] ||
  fail "complete -p hoprelay: $(complete -p hoprelay)"
[[ $(complete -p hoprelayd) == "complete -o filenames -F _hoprelayd hoprelayd" ]] ||
  fail "complete -p hoprelayd: $(complete -p hoprelayd)"

# complete_words WORD...: what completing the last word offers, sorted, space-separated.
complete_words() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  if [[ $1 == hoprelayd ]]; then _hoprelayd; else _hoprelay; fi
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
expect() { # expect WANT WORD...
  local got
  got=$(complete_words "${@:2}")
  [[ $got == "$1" ]] || fail "completing '${*:2}': got '$got', want '$1'"
}

demo=$src/config/examples/demo.toml
expect "validate " hoprelay va
expect "send status " hoprelay s
expect "a b c " hoprelay send --topology "$demo" --to ""
expect "b " hoprelay recv -t "$demo" --node b
expect "a b c " hoprelay validate "$demo" --node ""
expect "a b c " hoprelayd --topology "$demo" --node ""
expect "warn " hoprelayd --log-level w
expect "json text " hoprelayd --log-format ""
expect "length lines raw " hoprelay send --framing ""
expect "header pattern " hoprelay send --fill ""
expect "tree:2 tree:4 " hoprelay plan --shape t

# Every option of every --help is offered after "--".
HOPRELAY=$build/client/hoprelay
for sub in validate graph plan status send recv; do
  offered=$(complete_words hoprelay "$sub" --)
  for opt in $("$HOPRELAY" "$sub" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    [[ " $offered " == *" $opt "* ]] || fail "'hoprelay $sub --' does not offer $opt (offers: $offered)"
  done
done
offered=$(complete_words hoprelayd --)
for opt in $("$build/daemon/hoprelayd" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
  [[ " $offered " == *" $opt "* ]] || fail "'hoprelayd --' does not offer $opt (offers: $offered)"
done
# And the subcommands the top-level --help lists.
# (CLI11 writes the heading "Subcommands:" or "SUBCOMMANDS:", by version; finding none is a
# failure, so that the check cannot pass on an empty list.)
offered=$(complete_words hoprelay "")
listed=$("$HOPRELAY" --help | sed -n '/^\(SUBCOMMANDS\|Subcommands\):/,$p' | awk 'NR > 1 && NF {print $1}')
[[ -n $listed ]] || fail "no subcommands found in 'hoprelay --help'"
for sub in $listed; do
  [[ " $offered " == *" $sub "* ]] || fail "'hoprelay ' does not offer $sub (offers: $offered)"
done
echo "bash completion: ok"

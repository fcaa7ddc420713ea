# Sourced by the experiment scripts: the command log from which anyone can rerun what a run did.
#   command_log_start LOG SCRIPT MACHINE  appends to LOG the script's name, the UTC time, the commit
#                                         (and whether the tree had local changes) and MACHINE
#   run CMD...                            appends CMD to that LOG, runs it, appends its wall time
# The log is appended to: a continued run adds its own lines.
command_log_start() {
  command_log=$1
  {
    echo "# $2, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "# commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $3"
  } >> "$command_log"
}

run() {
  printf '%q ' "$@" >> "$command_log"
  echo >> "$command_log"
  local start end
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  echo "#   took $(awk "BEGIN{printf \"%.1f\", $end - $start}") s" >> "$command_log"
}

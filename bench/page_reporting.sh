# Sourced by scripts/bench.sh and tests/bench/bench_smoke.sh: pausing a
# virtual machine's free page reporting for the rounds that measure what it
# costs. A kernel with free page reporting hands free memory blocks of at
# least 2^page_reporting_order pages back to its host, which takes the pages
# away; the next touch of each costs a fault on the host, seen by the guest
# as CPU time in whatever touched the page (a copy into the page cache, a
# tensor's first write), not as steal. The kernel reports nothing while that
# order is above the largest one its page allocator has.
#
#   page_reporting_pausable         true where the knob exists and is writable (root)
#   pause_page_reporting            pauses it, remembering the value to restore; the
#                                   caller's EXIT trap (or resume) restores it
#   resume_page_reporting           restores it (idempotent)

page_reporting_knob=/sys/module/page_reporting/parameters/page_reporting_order
page_reporting_saved=

page_reporting_pausable() {
  [ -w "$page_reporting_knob" ] && [ -r /proc/buddyinfo ]
}

pause_page_reporting() {
  page_reporting_pausable || return 1
  # /proc/buddyinfo: "Node 0, zone NAME" and one free-block count per order.
  local largest
  largest=$(awk 'NR == 1 { print NF - 5 }' /proc/buddyinfo)
  [ -n "$page_reporting_saved" ] || page_reporting_saved=$(cat "$page_reporting_knob")
  echo $((largest + 1)) > "$page_reporting_knob"
}

resume_page_reporting() {
  [ -n "$page_reporting_saved" ] || return 0
  echo "$page_reporting_saved" > "$page_reporting_knob"
  page_reporting_saved=
}

# Sourced by the GPU-host probes (counters_holders.sh, pc_shared_probe.sh, pc_order_probe.sh, primer_cost.sh).
# job_ready LOG [SECONDS]: prints the pid of LOG's first `ready PID` line (survival_job.py and hung_job.cu print one
# once their first step is done), waiting up to SECONDS (default 30); returns 1 if none came.
job_ready() {
  local tenths=$((${2:-30} * 10))
  for _ in $(seq "$tenths"); do
    grep -qm1 '^ready [0-9][0-9]*' "$1" 2>/dev/null && { grep -om1 '^ready [0-9][0-9]*' "$1" | cut -d' ' -f2; return 0; }
    sleep 0.1
  done
  return 1
}

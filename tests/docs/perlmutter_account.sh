#!/usr/bin/env bash
# slurm/perlmutter-gpu.sbatch names a placeholder account (#SBATCH -A m0000_g) and
# docs/perlmutter.md says it refuses to run under it. Runs the script as Slurm
# would start it, outside a real job, with SLURM_JOB_ACCOUNT set:
#   refuses  - m0000_g: exit 2, nothing started, a message that says to pass -A;
#   accepts  - another account: past the check, the script hands over to
#              slurm/srun-hpcrl.sh, which stops at once for want of a job id.
#   tests/docs/perlmutter_account.sh refuses|accepts
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?usage: perlmutter_account.sh refuses|accepts}
fail() {
  echo "perlmutter_account ($mode): FAILED: $*" >&2
  exit 1
}
cd "$ROOT"
account=m0000_g
[ "$mode" = accepts ] && account=m1234_g
err=$(env -u SLURM_JOB_ID SLURM_JOB_ACCOUNT="$account" SLURM_SUBMIT_DIR="$ROOT" \
        bash slurm/perlmutter-gpu.sbatch configs/gsm8k-qwen2.5-1.5b-perlmutter.yaml 2>&1 >/dev/null)
rc=$?
echo "$err"
case "$mode" in
  refuses)
    [ "$rc" -eq 2 ] || fail "exit $rc under account m0000_g, expected 2"
    grep -q 'placeholder account m0000_g' <<<"$err" || fail "the message does not name the placeholder"
    grep -q 'sbatch -A <project>_g' <<<"$err" || fail "the message does not say to pass -A"
    grep -q 'srun-hpcrl' <<<"$err" && fail "the script went on to srun-hpcrl.sh"
    ;;
  accepts)
    grep -q 'placeholder' <<<"$err" && fail "account m1234_g was refused as the placeholder"
    grep -q 'srun-hpcrl.sh runs inside a Slurm job' <<<"$err" ||
      fail "the script did not reach slurm/srun-hpcrl.sh (exit $rc)"
    ;;
  *) fail "unknown mode (refuses|accepts)" ;;
esac
echo "perlmutter_account ($mode): passed"

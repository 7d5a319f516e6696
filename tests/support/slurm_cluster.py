"""A one-node Slurm cluster for the tests, started and stopped by them (tests/system/slurm/).

Debian's packages (``slurmctld slurmd slurm-client munge``, Slurm 22.05) run as root without systemd:
munged (as the munge user), slurmctld and slurmd, everything they keep (the munge key and socket,
``slurm.conf``, the controller's state, the node's spool, the logs) in one temporary folder, on two
free TCP ports picked at start, over loopback only (``SlurmctldHost=<host>(127.0.0.1)``,
``NodeAddr=127.0.0.1``). Client commands find the cluster through ``SLURM_CONF`` (``env()``).

    python -m tests.support.slurm_cluster /tmp/myslurm     # one by hand: prints SLURM_CONF, Ctrl-C or SIGTERM stops it

Every wait has a limit and says what it waited for (the machine is shared and loaded: the limits
are generous, never infinite). ``stop()`` cancels the jobs, waits for their steps to end, stops the
daemons and reports any process of this cluster still alive.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional

PACKAGES = "slurmctld slurmd slurm-client munge"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "squeue", "scancel", "sinfo")
PARTITION = "hpcnntest"
END_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
              "BOOT_FAIL", "DEADLINE")


def why_not() -> Optional[str]:
    """Why a cluster cannot be started here (None: it can)."""
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root (SlurmUser=root): run the tests as root"
    missing = [c for c in DAEMONS + CLIENTS + ("mungekey",) if not shutil.which(c, path=_sbin_path())]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): apt-get install {PACKAGES}"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (Debian's munge package creates it)"
    return None


def _sbin_path() -> str:
    return os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _which(cmd: str) -> str:
    found = shutil.which(cmd, path=_sbin_path())
    if not found:
        raise RuntimeError(f"{cmd} not found (apt-get install {PACKAGES})")
    return found


def free_ports(n: int) -> List[int]:
    """n distinct free TCP ports on loopback (bound together, so the kernel hands out n different ones)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def node_hardware() -> Dict[str, int]:
    """This host's CPUs, sockets, cores and threads and its memory in MiB, as `slurmd -C` reports them."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=60).stdout
    fields = dict(re.findall(r"(\w+)=(\S+)", out.splitlines()[0]))
    keys = ("CPUs", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {k: int(fields[k]) for k in keys}


def wait_for(what: str, check, timeout: float, every: float = 0.5):
    """check() until it returns something true; TimeoutError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(every)


class LocalSlurm:
    """One node, one partition (``PARTITION``, the default), this host's CPUs and most of its memory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.root / "etc" / "slurm.conf"
        self.logs = self.root / "log"
        self.pids: Dict[str, int] = {}
        self.hardware: Dict[str, int] = {}

    # ---- client side
    def env(self, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """`base` (default: this process's environment) with SLURM_CONF set and no SLURM_* job variables."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *args: str, timeout: float = 120, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        kw.setdefault("env", self.env())
        r = subprocess.run([_which(args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def sbatch(self, *args: str, cwd: Path, env: Optional[Dict[str, str]] = None) -> int:
        """Submits (sbatch --parsable, the partition set); the job id."""
        r = self.run("sbatch", "--parsable", f"--partition={PARTITION}", *args, cwd=cwd, env=self.env(env))
        return int(r.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> Dict[str, str]:
        """`scontrol show job` as a dict (JobState, Restarts, ExitCode, ...); {} once Slurm forgot the job."""
        r = self.run("scontrol", "-o", "show", "job", str(job_id), check=False)
        if r.returncode != 0:
            return {}
        return dict(re.findall(r"(\w+)=(\S*)", r.stdout))

    def wait_end(self, job_id: int, timeout: float = 300) -> Dict[str, str]:
        """Waits for the job to end (an end state, not requeued); its `scontrol show job` record."""
        def ended():
            info = self.job(job_id)
            return info if info.get("JobState") in END_STATES else None
        return wait_for(f"job {job_id} to end ({self.describe(job_id)})", ended, timeout)

    def wait_state(self, job_id: int, states: Iterable[str], timeout: float = 300) -> Dict[str, str]:
        states = tuple(states)
        def reached():
            info = self.job(job_id)
            return info if info.get("JobState") in states else None
        return wait_for(f"job {job_id} to be {' or '.join(states)} ({self.describe(job_id)})", reached, timeout)

    def describe(self, job_id: int) -> str:
        info = self.job(job_id)
        return " ".join(f"{k}={info.get(k)}" for k in ("JobState", "Reason", "Restarts", "ExitCode"))

    # ---- daemons
    def start(self, timeout: float = 120) -> None:
        """Writes the configuration and starts munged, slurmctld and slurmd; returns when the node is idle."""
        why = why_not()
        if why:
            raise RuntimeError(why)
        self.hardware = node_hardware()
        for d in ("etc", "state", "spool", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        self._start_munge()
        ctld_port, slurmd_port = free_ports(2)
        hw = self.hardware
        memory = max(1024, hw["RealMemory"] - 2048)  # room for the system: the jobs ask for little
        r = self.root
        self.conf.write_text(f"""# written by tests/support/slurm_cluster.py: a one-node test cluster
ClusterName=hpcnntest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={self.logs}/slurmctld.log
SlurmdLogFile={self.logs}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobRequeue=1
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# A job's processes get TERM, then KILL after KillWait seconds (the scripts' traps back up in that time).
KillWait=15
MinJobAge=600
InactiveLimit=0
OverTimeLimit=0
SchedulerParameters=sched_interval=2
NodeName={self.host} NodeAddr=127.0.0.1 CPUs={hw['CPUs']} Boards=1 SocketsPerBoard={hw['SocketsPerBoard']} \
CoresPerSocket={hw['CoresPerSocket']} ThreadsPerCore={hw['ThreadsPerCore']} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
""")
        env = self.env()
        subprocess.run([_which("slurmctld"), "-f", str(self.conf)], env=env, check=True, timeout=60,
                       capture_output=True)
        self.pids["slurmctld"] = self._pid_from(r / "slurmctld.pid", "slurmctld", timeout)
        subprocess.run([_which("slurmd"), "-f", str(self.conf), "-N", self.host], env=env, check=True, timeout=60,
                       capture_output=True)
        self.pids["slurmd"] = self._pid_from(r / "slurmd.pid", "slurmd", timeout)

        def idle():
            out = self.run("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
            return out if out.startswith("idle") else None
        try:
            wait_for("the test node to be idle (sinfo)", idle, timeout)
        except TimeoutError as e:
            raise TimeoutError(f"{e}; logs: {self.log_tail()}") from None

    def _start_munge(self) -> None:
        munge = pwd.getpwnam("munge")
        m = self.root / "munge"
        # munged checks its folders: the key's and seed's private to it, the socket's open to all.
        for d, mode in (("etc", 0o700), ("lib", 0o700), ("run", 0o755), ("log", 0o700)):
            (m / d).mkdir(parents=True, exist_ok=True)
            os.chown(m / d, munge.pw_uid, munge.pw_gid)
            os.chmod(m / d, mode)
        os.chmod(m, 0o755)
        key = m / "etc" / "munge.key"
        subprocess.run([_which("mungekey"), "-c", "-f", "-k", str(key)], check=True, capture_output=True, timeout=60)
        os.chown(key, munge.pw_uid, munge.pw_gid)
        os.chmod(key, 0o600)
        self.munge_socket = m / "run" / "munge.socket"
        pid_file = m / "run" / "munged.pid"
        cmd = [_which("munged"), f"--key-file={key}", f"--socket={self.munge_socket}", f"--pid-file={pid_file}",
               f"--log-file={m / 'log' / 'munged.log'}", f"--seed-file={m / 'lib' / 'munged.seed'}"]

        def as_munge():
            os.setgid(munge.pw_gid)
            os.setgroups([])
            os.setuid(munge.pw_uid)
        r = subprocess.run(cmd, preexec_fn=as_munge, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"munged did not start: {r.stderr.strip()}")
        self.pids["munged"] = self._pid_from(pid_file, "munged", 60)

    def _pid_from(self, pid_file: Path, name: str, timeout: float) -> int:
        def read():
            try:
                return int(pid_file.read_text().split()[0])
            except (OSError, ValueError, IndexError):
                return None
        try:
            return wait_for(f"{name}'s pid file {pid_file}", read, timeout)
        except TimeoutError as e:
            raise TimeoutError(f"{e}; logs: {self.log_tail()}") from None

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for log in sorted(self.root.glob("**/*.log")):
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {log}\n" + "\n".join(text))
        return "\n".join(out)

    def job_processes(self) -> List[int]:
        """Processes of this cluster's jobs still alive: slurmstepd and whatever carries its SLURM_CONF."""
        found = []
        for p in Path("/proc").iterdir():
            if not p.name.isdigit() or int(p.name) == os.getpid():
                continue
            try:
                environ = (p / "environ").read_bytes()
                cmdline = (p / "cmdline").read_bytes()
            except OSError:
                continue
            if f"SLURM_CONF={self.conf}".encode() in environ.split(b"\0") or \
                    (b"slurmstepd" in cmdline and str(self.root).encode() in environ):
                found.append(int(p.name))
        return found

    def stop(self, timeout: float = 120) -> List[str]:
        """Cancels every job, waits for their processes to end, stops the daemons (slurmd, slurmctld,
        munged). Returns what is still alive afterwards (empty: all gone)."""
        if "slurmctld" in self.pids and _alive(self.pids["slurmctld"]):
            self.run("scancel", f"--partition={PARTITION}", check=False, timeout=60)
            try:
                wait_for("the test cluster's jobs to end (squeue)",
                         lambda: not self.run("squeue", "-h", check=False, timeout=60).stdout.strip(), timeout)
            except TimeoutError:
                pass  # killed below; reported if they survive
        for pid in self.job_processes():
            _kill(pid, signal.SIGKILL)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.get(name)
            if pid and _alive(pid):
                _kill(pid, signal.SIGTERM)
                try:
                    wait_for(f"{name} (pid {pid}) to stop", lambda: not _alive(pid), 30, every=0.2)
                except TimeoutError:
                    _kill(pid, signal.SIGKILL)
                    wait_for(f"{name} (pid {pid}) to die", lambda: not _alive(pid), 30, every=0.2)
        left = [f"{name} (pid {pid})" for name, pid in self.pids.items() if _alive(pid)]
        left += [f"job process {pid}" for pid in self.job_processes()]
        # And anything else started with this cluster's files on its command line (pgrep -f).
        r = subprocess.run(["pgrep", "-f", str(self.root)], capture_output=True, text=True, timeout=60)
        seen = {int(p) for p in r.stdout.split()} - {os.getpid()} - set(self.pids.values())
        left += [f"process {pid} ({_cmdline(pid)})" for pid in sorted(seen) if _alive(pid)]
        return left


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv: List[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1])
        return 2
    cluster = LocalSlurm(Path(argv[0]))
    cluster.start()
    print(f"export SLURM_CONF={cluster.conf}    # then sbatch, squeue, scontrol ... (partition {PARTITION})")
    print("Ctrl-C (or SIGTERM) stops the cluster")

    def stop_on(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop_on)
    signal.signal(signal.SIGINT, stop_on)  # also where the shell started it with SIGINT ignored (`&`)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        left = cluster.stop()
        print("stopped" if not left else f"still alive: {', '.join(left)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

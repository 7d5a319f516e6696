"""What Open OnDemand's portal does with a batch-connect app, for the tests of ood/: render its ERB
files with Ruby's ERB (tests/support/ood_render.rb), turn the rendered submit.yml into sbatch
options, and wrap the app's before.sh / script.sh / after.sh in a job script that behaves as the
portal's "basic" template (ood_core) does.

The wrapper is this project's own stand-in, written from ood_core's documented behaviour: in the
session folder it defines the helpers the app's scripts call (find_port, create_passwd,
wait_until_port_used, clean_up), sets ``host`` to the node's name, sources before.sh, starts
script.sh in the background, sources after.sh, then writes the connection file (connection.yml:
host, port, password, readable by the user only) and waits for script.sh."""
from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

from tests.support import paths

RENDER = paths.ROOT / "tests" / "support" / "ood_render.rb"
CONNECTION_FILE = "connection.yml"


def ruby() -> str:
    """The ruby command, or '' where Ruby is not installed."""
    return shutil.which("ruby") or ""


def render(template: Path, values: Dict[str, object], scratch: Path) -> str:
    """`template` rendered with `values` (strings, as a form sends them) by Ruby's ERB."""
    scratch.mkdir(parents=True, exist_ok=True)
    values_file = scratch / f"{template.name}.values.json"
    values_file.write_text(json.dumps({k: str(v) for k, v in values.items()}))
    r = subprocess.run([ruby(), str(RENDER), str(template), str(values_file)], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"ERB could not render {template}: {r.stderr.strip()}")
    return r.stdout


def load_yaml(text: str) -> object:
    """YAML read by Ruby's own parser (the portal's), as JSON: no Python YAML package needed."""
    r = subprocess.run([ruby(), "-ryaml", "-rjson", "-e", "print JSON.generate(YAML.safe_load(STDIN.read))"],
                       input=text, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise ValueError(f"not YAML that Ruby reads: {r.stderr.strip()}")
    return json.loads(r.stdout)


def form_defaults(form_yml: Path) -> Dict[str, str]:
    """The value each attribute of form.yml starts with (its `value`, else its first option)."""
    form = load_yaml(form_yml.read_text())
    values = {}
    for name in form["form"]:
        attr = form.get("attributes", {}).get(name, {})
        if "value" in attr:
            values[name] = str(attr["value"])
        elif attr.get("options"):
            values[name] = str(attr["options"][0][1])
        else:
            values[name] = ""
    return values


def sbatch_options(submit_yml: str) -> List[str]:
    """The sbatch options of a rendered submit.yml's `script` section, as ood_core's Slurm adapter
    passes them: queue_name, wall_time (seconds, rounded up to minutes), then `native` as it is."""
    script = load_yaml(submit_yml)["script"]
    options = []
    if script.get("queue_name"):
        options.append(f"--partition={script['queue_name']}")
    if script.get("wall_time"):
        options.append(f"--time={math.ceil(int(script['wall_time']) / 60)}")
    return options + [str(a) for a in script.get("native", [])]


WRAPPER = r"""#!/bin/bash
# The tests' stand-in for Open OnDemand's batch-connect "basic" template (tests/support/ood_batch_connect.py).
cd "{work_dir}"

port_used() {{  # port_used HOST:PORT: something accepts connections there
  local where=$1
  (exec 3<>"/dev/tcp/${{where%:*}}/${{where##*:}}") 2>/dev/null
}}
find_port() {{  # find_port HOST: a free port in 2000-65535 on HOST
  local p
  while :; do
    p=$(shuf -i 2000-65535 -n 1)
    port_used "${{1:-localhost}}:$p" || {{ echo "$p"; return 0; }}
  done
}}
wait_until_port_used() {{  # wait_until_port_used HOST:PORT SECONDS
  local i
  for ((i = 0; i < ${{2:-30}} * 2; i++)); do
    port_used "$1" && return 0
    sleep 0.5
  done
  return 1
}}
create_passwd() {{  # create_passwd N: N random letters and digits
  tr -cd 'a-zA-Z0-9' < /dev/urandom | head -c "${{1:-32}}"
}}
clean_up() {{
  echo "batch-connect: cleaning up"
  [ -n "${{SCRIPT_PID:-}}" ] && kill "${{SCRIPT_PID}}" 2>/dev/null
  exit "${{1:-0}}"
}}
export -f port_used find_port wait_until_port_used create_passwd

host=$(hostname)
export host
[ -e before.sh ] && source before.sh
echo "batch-connect: starting script.sh"
./script.sh &
SCRIPT_PID=$!
[ -e after.sh ] && source after.sh
( umask 077; printf 'host: %s\nport: %s\npassword: %s\n' "$host" "$port" "$password" > "{conn_file}" )
echo "batch-connect: wrote {conn_file}"
wait "$SCRIPT_PID" || clean_up 1
clean_up 0
"""


def write_session(app: Path, values: Dict[str, object], session: Path) -> Path:
    """The session folder as the portal prepares it: the app's template/ files rendered with the
    form's values (before.sh, script.sh, after.sh) and the job script that wraps them; its path."""
    session.mkdir(parents=True, exist_ok=True)
    for erb in sorted((app / "template").glob("*.erb")):
        out = session / erb.name[:-len(".erb")]
        out.write_text(render(erb, values, session / ".render"))
        out.chmod(0o700)
    job = session / "job_script.sh"
    job.write_text(WRAPPER.format(work_dir=session, conn_file=CONNECTION_FILE))
    job.chmod(0o700)
    return job


def read_connection(path: Path) -> Dict[str, str]:
    return {str(k): str(v) for k, v in load_yaml(path.read_text()).items()}

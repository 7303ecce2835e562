"""Checks a built collection artifact (ansible-galaxy collection build) for what it ships.

    python tests/check_artifact.py tensorfusion-ops-X.Y.Z.tar.gz [SOURCE_TREE]

- its top-level entries are an allow-list (anything else, such as the nested copy of the
  collection a stray .ansible/ folder used to bring, or lab/, is an error; the required ones must
  be there);
- the shipped README.md and docs/**/*.md refer only to files the artifact ships: every relative
  Markdown link (resolved from the page's folder) and every path written in the text (code spans,
  code blocks, prose) that starts in one of the source tree's top-level folders or leaves the tree
  (../) is resolved from the collection's root and must be a shipped file or folder - except
  the two source-tree commands README.md names for a newcomer (SOURCE_TREE_COMMANDS), which
  README.md alone may name and must name, as commands of the source tree.

- it carries no credentials: no private key (a PEM ``PRIVATE KEY`` block), no kubeconfig (a file
  named kubeconfig, ``*.kubeconfig``, or a data file that is one: ``kind: Config`` with clusters
  and users), no token (``tokens.csv``, ``token``, ``*.token``, a service-account JWT) and no lab
  state folder (its marker ``.tfops-lab-state``): ansible-galaxy collection build packs every file
  that is not ignored, such as a lab started with its state inside the tree.

- its action plugins: every module has one, none is a link (antsibull-docs reads a link in
  plugins/action as the module being an alias of the one linked to), and each but those with more
  to do (OWN_ACTIONS) is the one line ``ActionModule = module_action("<its module>")`` of
  plugins/plugin_utils/in_process.py, so every module runs in ansible-playbook's worker with the
  same code.

Prints every problem and exits 1 when there is any. SOURCE_TREE (default: the current folder, a
git checkout) names the top-level entries of the source tree, which tell a path from other text.
"""
import posixpath
import re
import subprocess
import sys
import tarfile

ALLOWED_TOP_LEVEL = {
    "MANIFEST.json", "FILES.json", "README.md", "COPYING", "CHANGELOG.rst", "bindep.txt",
    "requirements.txt", "changelogs", "docs", "extensions", "meta", "playbooks", "plugins", "roles",
}
REQUIRED_TOP_LEVEL = {"MANIFEST.json", "FILES.json", "README.md", "COPYING", "meta", "plugins", "roles",
                      "playbooks"}

# README.md's two commands of the source tree (not shipped): the main job on the lab, every test.
SOURCE_TREE_COMMANDS = ("demo/run.sh", "tests/run-all.sh")

# The actions that do more than run their module in the worker.
# runbook_guard is only an action (plugin_utils/in_process.ACTION_ONLY): it reads the play's variables as given.
OWN_ACTIONS = {"plugins/action/runbook_inputs.py", "plugins/action/runbook_guard.py"}
_ACTION_LINE = re.compile(r'^ActionModule = module_action\("([a-z0-9_]+)"\)$', re.M)

_URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.I)
_MD_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# A path: a run of path characters containing a slash, not inside a longer word.
_PATH = re.compile(r"(?<![\w./~-])((?:\.\./|[\w.-]+/)[\w./-]*)")


def shipped_names(tar_names):
    """Every file and folder of the artifact, as paths relative to its root."""
    names = set()
    for name in tar_names:
        name = name.strip("/")
        if name.startswith("./"):
            name = name[2:]
        if not name or name == ".":
            continue
        parts = name.split("/")
        for i in range(1, len(parts) + 1):
            names.add("/".join(parts[:i]))
    return names


def top_level_problems(names):
    top = {n for n in names if "/" not in n}
    problems = ["top-level entry %r is not in the allow-list of tests/check_artifact.py" % n
                for n in sorted(top - ALLOWED_TOP_LEVEL)]
    problems += ["required top-level entry %r is missing" % n for n in sorted(REQUIRED_TOP_LEVEL - top)]
    return problems


def _resolve(base_dir, target):
    """target relative to base_dir inside the collection, or None when it leaves the collection."""
    path = posixpath.normpath(posixpath.join(base_dir, target))
    return None if path == ".." or path.startswith("../") else path.rstrip("/")


def link_problems(page, text, names, source_top_level):
    """The references of one page (its path in the artifact, its text) to what is not shipped."""
    problems = []
    commands = SOURCE_TREE_COMMANDS if page == "README.md" else ()
    for command in commands:
        if "`%s`" % command not in text:
            problems.append("%s does not name the source tree's command %s" % (page, command))
    text = _URL.sub(" ", text)
    for target in _MD_LINK.findall(text):
        target = target.split("#", 1)[0]
        if not target or ":" in target:
            continue
        resolved = _resolve(posixpath.dirname(page), target)
        if resolved is None or resolved not in names:
            problems.append("%s links to %s, which the artifact does not ship" % (page, target))
    for path in _PATH.findall(_MD_LINK.sub("]", text)):
        path = path.rstrip(".")
        if path in commands:
            continue
        first = path.split("/", 1)[0]
        if first != ".." and first not in source_top_level:
            continue
        resolved = _resolve("", path)
        if resolved is None or resolved not in names:
            problems.append("%s refers to %s, which the artifact does not ship" % (page, path))
    return problems


_PRIVATE_KEY = re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")
_YAML_KUBECONFIG = [re.compile(p, re.M) for p in (r"^kind:\s*[\"']?Config[\"']?\s*$", r"^clusters:", r"^users:")]
_JSON_KUBECONFIG = [re.compile(p) for p in (r'"kind"\s*:\s*"Config"', r'"clusters"\s*:', r'"users"\s*:')]
TOKEN_NAMES = {"tokens.csv", "token", "kubeconfig"}
LAB_MARKER = ".tfops-lab-state"  # lab/state.py


def credential_problems(name, data):
    """What a shipped file (its path and bytes) gives away: a key, a kubeconfig, a token."""
    base = posixpath.basename(name)
    problems = []
    if base == LAB_MARKER:
        problems.append("%s: a lab state folder is shipped (its keys, token file and kubeconfigs)" % name)
    if base in TOKEN_NAMES or base.endswith((".token", ".kubeconfig")):
        problems.append("%s: a token or kubeconfig file is shipped" % name)
    text = data.decode("utf-8", errors="replace")
    if _PRIVATE_KEY.search(text):
        problems.append("%s holds a private key" % name)
    if _JWT.search(text):
        problems.append("%s holds a token (a JWT)" % name)
    if not base.endswith(".py") and (all(p.search(text) for p in _YAML_KUBECONFIG)
                                     or all(p.search(text) for p in _JSON_KUBECONFIG)):
        problems.append("%s is a kubeconfig" % name)
    return problems


def action_problems(members):
    """What keeps an action plugin from being its module's in-process action; ``members`` maps
    each file's path in the artifact to its tar member and its bytes (None for a link)."""
    problems = []
    actions = {n for n in members if posixpath.dirname(n) == "plugins/action" and n.endswith(".py")}
    modules = {posixpath.basename(n) for n in members if posixpath.dirname(n) == "plugins/modules"
               and n.endswith(".py") and not posixpath.basename(n).startswith("_")}
    problems += ["module %s has no action plugin (plugins/action/%s)" % (m[:-3], m)
                 for m in sorted(modules - {posixpath.basename(n) for n in actions})]
    for name in sorted(actions):
        member, data = members[name]
        if member.issym():
            problems.append("%s is a link (to %s): antsibull-docs would document its module as an alias"
                            % (name, member.linkname))
            continue
        if name in OWN_ACTIONS:
            continue
        named = _ACTION_LINE.findall((data or b"").decode("utf-8", "replace"))
        if named != [posixpath.basename(name)[:-3]]:
            problems.append('%s is not ActionModule = module_action("%s")' % (name, posixpath.basename(name)[:-3]))
    return problems


def pages(names):
    return sorted(n for n in names if n == "README.md" or (n.startswith("docs/") and n.endswith(".md")))


def check(artifact, source_tree="."):
    secrets, members = [], {}
    with tarfile.open(artifact) as tar:
        names = shipped_names(tar.getnames())
        texts = {page: tar.extractfile(page).read().decode("utf-8") for page in pages(names)}
        for member in tar.getmembers():
            name = member.name[2:] if member.name.startswith("./") else member.name
            data = tar.extractfile(member).read() if member.isfile() else None
            members[name] = (member, data)
            if member.isfile():
                secrets += credential_problems(name, data)
    listed = subprocess.run(["git", "ls-files"], cwd=source_tree, check=True, capture_output=True,
                            text=True).stdout.split()
    source_top_level = {n.split("/", 1)[0] for n in listed}
    problems = top_level_problems(names) + secrets + action_problems(members)
    for page, text in texts.items():
        problems += link_problems(page, text, names, source_top_level)
    return problems


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems = check(*argv[1:])
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

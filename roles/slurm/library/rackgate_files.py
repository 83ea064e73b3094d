#!/usr/bin/python
# Copyright: rackgate authors. Apache-2.0.
"""Write several small files (and their directories) in one module call."""

from __future__ import annotations

import base64
import grp
import os
import pwd
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: rackgate_files
short_description: Write several small files and their directories in one call
description:
  - Creates the directories, then writes each file whose content, owner, group or mode
    differs, atomically (a temporary file in the same directory, then a rename).
  - One call replaces a loop of M(ansible.builtin.template) or M(ansible.builtin.copy)
    tasks, each of which costs a round trip (two when a file is unchanged: a stat and
    a file module call). The slurm role uses it for its configuration files, the munge
    key and the local fact file.
  - Supports check mode. Returns the paths that changed, so handlers can restart
    exactly the daemons whose files changed.
options:
  directories:
    description: Directories to create (parents included) before writing the files.
    type: list
    elements: dict
    default: []
    suboptions:
      path: {description: Absolute path., type: path, required: true}
      owner: {description: Owner name., type: str, default: root}
      group: {description: Group name., type: str, default: root}
      mode: {description: Octal mode as a string, e.g. "0755"., type: str, default: "0755"}
  files:
    description: Files to write.
    type: list
    elements: dict
    required: true
    suboptions:
      path: {description: Absolute path., type: path, required: true}
      content: {description: Text content (UTF-8)., type: str}
      secret_b64: {description: Binary content as base64; never logged., type: str}
      owner: {description: Owner name., type: str, default: root}
      group: {description: Group name., type: str, default: root}
      mode: {description: Octal mode as a string, e.g. "0644"., type: str, default: "0644"}
author: rackgate
"""

RETURN = r"""
changed_paths:
  description: Paths of the directories and files that were (or, in check mode, would be) changed.
  type: list
  elements: str
  returned: always
"""


def _ids(module, owner, group):
    """uid and gid; in check mode (None, None) for a user a package has not created yet."""
    try:
        return pwd.getpwnam(owner).pw_uid, grp.getgrnam(group).gr_gid
    except KeyError as exc:
        if module.check_mode:
            return None, None
        module.fail_json(msg=f"unknown owner or group {owner}:{group}: {exc}")
        raise  # unreachable: fail_json exits


def _attrs_differ(st, uid, gid, mode):
    if uid is None:
        return True
    return st.st_uid != uid or st.st_gid != gid or stat.S_IMODE(st.st_mode) != mode


def main():
    entry = {
        "path": {"type": "path", "required": True},
        "owner": {"type": "str", "default": "root"},
        "group": {"type": "str", "default": "root"},
    }
    module = AnsibleModule(
        argument_spec={
            "directories": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": dict(entry, mode={"type": "str", "default": "0755"}),
            },
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": dict(
                    entry,
                    content={"type": "str"},
                    secret_b64={"type": "str", "no_log": True},
                    mode={"type": "str", "default": "0644"},
                ),
                "mutually_exclusive": [["content", "secret_b64"]],
                "required_one_of": [["content", "secret_b64"]],
            },
        },
        supports_check_mode=True,
    )
    changed = []

    for item in module.params["directories"]:
        path, mode = item["path"], int(item["mode"], 8)
        uid, gid = _ids(module, item["owner"], item["group"])
        if not os.path.isdir(path):
            changed.append(path)
            if not module.check_mode:
                os.makedirs(path, mode=mode, exist_ok=True)
                os.chown(path, uid, gid)
                os.chmod(path, mode)
        elif _attrs_differ(os.stat(path), uid, gid, mode):
            changed.append(path)
            if not module.check_mode:
                os.chown(path, uid, gid)
                os.chmod(path, mode)

    for item in module.params["files"]:
        path, mode = item["path"], int(item["mode"], 8)
        uid, gid = _ids(module, item["owner"], item["group"])
        if item["secret_b64"] is not None:
            data = base64.b64decode(item["secret_b64"])
        else:
            data = item["content"].encode("utf-8")
        try:
            with open(path, "rb") as handle:
                current = handle.read()
            st = os.stat(path)
        except FileNotFoundError:
            current, st = None, None
        if current == data:
            if _attrs_differ(st, uid, gid, mode):
                changed.append(path)
                if not module.check_mode:
                    os.chown(path, uid, gid)
                    os.chmod(path, mode)
            continue
        changed.append(path)
        if module.check_mode:
            continue
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            module.fail_json(
                msg=f"directory {directory} of {path} does not exist", changed_paths=changed
            )
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".rackgate-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chown(tmp, uid, gid)
            os.chmod(tmp, mode)
            os.rename(tmp, path)
        except OSError as exc:
            os.unlink(tmp)
            module.fail_json(msg=f"cannot write {path}: {exc}", changed_paths=changed)

    module.exit_json(changed=bool(changed), changed_paths=changed)


if __name__ == "__main__":
    main()

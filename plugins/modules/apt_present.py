"""Documentation only: the work is the action plugin of the same name
(plugins/action/apt_present.py), which runs ansible.builtin.apt when it is needed."""

DOCUMENTATION = """
module: apt_present
short_description: ansible.builtin.apt (state=present) that asks dpkg first
description:
  - Takes ansible.builtin.apt's options. Where state is present and apt is asked for
    nothing else (no cache update, no .deb, no upgrade), one dpkg-query on the node says
    whether every package is installed at the version asked (C(name=version), with
    apt's trailing C(*)); if so the task is ok without opening apt's cache.
  - Otherwise, or where any package is missing, ansible.builtin.apt runs with the
    options as given.
options: {}
notes:
  - Runs in check mode; the dpkg-query it makes changes nothing.
"""

EXAMPLES = """
- name: Install munge
  kiln.cluster.apt_present:
    name: munge
    state: present
"""

RETURN = """
msg:
  description: The packages found installed, where apt did not run.
  returned: when every package was installed as asked
  type: str
"""

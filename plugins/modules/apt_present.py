"""Documentation only: the work is the action plugin of the same name
(plugins/action/apt_present.py), which runs ansible.builtin.apt when it is needed."""

DOCUMENTATION = """
module: apt_present
short_description: ansible.builtin.apt that asks dpkg first
description:
  - Takes ansible.builtin.apt's options. Where apt is asked for nothing but the packages
    named (no .deb, no upgrade, no autoremove or clean), plain names (and for present
    C(name=version), with apt's trailing C(*)), it asks the node first and reports ok
    without opening apt's cache where there is nothing to do.
  - C(state=present) - one dpkg-query says every package is installed at the version
    asked.
  - C(state=absent) - one dpkg-query says none is installed (with C(purge=true), none has
    its configuration kept either). Otherwise ansible.builtin.apt runs with only the
    packages still there.
  - C(state=latest) - dpkg-query and C(apt-cache policy) say every package is installed
    at apt's candidate version (with a pin, the pinned one).
  - For C(state=present) and C(state=absent) the lists' age does not matter, so packages
    installed as asked send no node to its mirror, whatever C(cache_valid_time) says.
    C(update_cache) alone (no C(cache_valid_time)) always runs apt.
  - An install (C(state=present), a package missing) runs apt with C(update_cache) and
    the task's C(cache_valid_time), an hour (3600) where it names none, so apt updates
    lists older than that first.
  - C(state=latest) with C(update_cache) and C(cache_valid_time) - the packages are
    checked as above only where apt's lists are no older than it, read as
    ansible.builtin.apt reads it (the update-success stamp, else the lists' directory).
  - Where apt runs and would skip the update C(cache_valid_time) allows, but its lists
    hold no package index (emptied when an image was built, the directory still recent),
    apt runs with C(update_cache) and no C(cache_valid_time).
  - Otherwise ansible.builtin.apt runs with the options as given.
options: {}
notes:
  - Runs in check mode; the queries it makes change nothing. Where apt runs, the result,
    check mode and diff are ansible.builtin.apt's.
"""

EXAMPLES = """
- name: Install munge
  kiln.cluster.apt_present:
    name: munge
    state: present

- name: Purge the module system not chosen
  kiln.cluster.apt_present:
    name: [environment-modules]
    state: absent
    purge: true
"""

RETURN = """
msg:
  description: The packages found as asked (installed, not installed, at the candidate),
    where apt did not run.
  returned: when there was nothing to do
  type: str
"""

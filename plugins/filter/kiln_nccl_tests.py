"""Filters that hand the nccl_tests role's settings to kiln.roles.nccl_tests: the role and
`kiln inventory check` judge them the same way, and one place plans the build."""

from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import cuda_toolkit
from kiln.roles import nccl_tests


def kiln_nccl_tests_problems(settings):
    """What is wrong with one node's nccl_tests_* settings (without the prefix)."""
    return nccl_tests.settings_problems(settings)


def kiln_nccl_tests_plan(settings, toolchain, compute_caps, jobs):
    """{skip} or {source, source_dir, build_dir, bin_dir, stamp_path, stamp, make,
    programs} for one node, from its settings, kiln_node.cuda_toolchain's report and
    nvidia-smi's compute_cap lines."""
    return nccl_tests.plan(settings, toolchain, list(compute_caps), int(jobs))


def kiln_nccl_tests_bin_dir(version):
    """Where the programs of this nccl-tests release are (validate_nccl_tests_dir)."""
    return nccl_tests.bin_dir(str(version or ""))


def kiln_cuda_toolkit_plan(settings, source, repository, fact_text, configured_driver):
    """{install, fail, cuda, nccl, packages, pin, cuda_home, nccl_home}: the CUDA
    compiler and NCCL to install on one node from NVIDIA's repository, if any
    (kiln.cuda_toolkit.plan), its driver read from the kiln_gpu fact's text."""
    driver = cuda_toolkit.node_driver(str(fact_text or ""), str(configured_driver or ""))
    return cuda_toolkit.plan(settings, str(source or ""), bool(repository), driver)


def kiln_cuda_toolkit_not_offered(policy, chosen):
    """What NVIDIA's repository does not offer of the chosen packages, or ""."""
    return cuda_toolkit.not_offered(str(policy or ""), chosen)


class FilterModule:
    def filters(self):
        return {
            "kiln_nccl_tests_problems": kiln_nccl_tests_problems,
            "kiln_nccl_tests_plan": kiln_nccl_tests_plan,
            "kiln_nccl_tests_bin_dir": kiln_nccl_tests_bin_dir,
            "kiln_cuda_toolkit_plan": kiln_cuda_toolkit_plan,
            "kiln_cuda_toolkit_not_offered": kiln_cuda_toolkit_not_offered,
        }

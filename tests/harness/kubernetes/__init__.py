"""Real Kubernetes v1.20.2 for tests, built from Debian 12's own `kubernetes` source
package and cached (build.py), plus "namespace machines" to run nodes in
(machine.py). docs/testing-kubernetes.md says how to use them.
"""

"""The node agent (`shoal-agent`): a small program on each node that pulls tasks
from shoal over HTTP(S), runs them, and reports progress and a heartbeat.

It depends on nothing of shoal's but this package (the standard library only),
so that a node can carry it alone. `protocol.py` is the contract both sides
share; `tasks.py` turns a task into the node's commands; `agent.py` is the loop.
"""

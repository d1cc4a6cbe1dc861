"""Adapters that put turnstore under the agent frameworks people already use.

Each adapter lives in its own module and imports its framework only there, so `import
turnstore` never needs one; install a framework with its extra (`turnstore[openai-agents]`).
"""

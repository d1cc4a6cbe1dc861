"""Pure rules of the contracts: validation, event journal rules, the context-append rule."""

"""A plugin worker module that cannot be imported."""

raise ImportError("this plugin needs a library that is not installed")

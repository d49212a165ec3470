"""The notebook layer: the ``%load_ext loom_nb`` extension, the ``%loom`` magics, the live run
view and the step timeline. The only part of loom_nb that imports IPython, ipywidgets or anywidget;
nothing else needs it (scripts use ``Run`` / ``Gate`` directly).

Import the pieces from their modules (``loom_nb.notebook.run_view.RunView``,
``loom_nb.notebook.timeline.timeline``...): importing this package pulls in no widget library.
"""

"""rubricstree training side: data builders, tiny local models, trainer launchers, evaluation."""

"""The HTML report templates, installed as the package ``nsync.templates`` (a regular package, so that
``importlib.resources`` finds them in a wheel, a zip or an editable install alike)."""

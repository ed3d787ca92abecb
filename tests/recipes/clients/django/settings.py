"""Settings of the Django recipe's test project (README "Clients and ORMs"): one app, `shop`,
on the database named by IDGEN_DATABASE_URL (postgresql://user@host:port/dbname)."""

import os
from urllib.parse import unquote, urlsplit

_url = urlsplit(os.environ["IDGEN_DATABASE_URL"])

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname,
        "PORT": _url.port,
    }
}
INSTALLED_APPS = ["shop"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
SECRET_KEY = "idgen-recipe-test"

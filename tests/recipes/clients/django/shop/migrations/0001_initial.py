from django.contrib.postgres.operations import CreateExtension
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        # CREATE EXTENSION IF NOT EXISTS idgen (needs a role allowed to create it; idgen must be
        # in shared_preload_libraries). Reversed: DROP EXTENSION idgen.
        CreateExtension("idgen"),
        migrations.RunSQL(
            sql="SELECT serial_create('invoice', 'INV-{YYYY}-{seq:06}', reset => 'year')",
            reverse_sql="SELECT serial_drop('invoice')",
        ),
        migrations.CreateModel(
            name="Order",
            fields=[
                (
                    "id",
                    models.BigIntegerField(
                        db_default=models.Func(
                            function="snowflake_nextval", output_field=models.BigIntegerField()
                        ),
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                (
                    "number",
                    models.TextField(
                        db_default=models.Func(
                            models.Value("invoice"),
                            function="serial_nextval",
                            output_field=models.TextField(),
                        ),
                        unique=True,
                    ),
                ),
                ("note", models.TextField(blank=True, default="")),
            ],
        ),
    ]

from django.db import models


class Order(models.Model):
    # A Snowflake id drawn by the database: the column's DEFAULT is snowflake_nextval().
    id = models.BigIntegerField(
        primary_key=True,
        db_default=models.Func(function="snowflake_nextval", output_field=models.BigIntegerField()),
    )
    # A business serial (created by the migration): INV-2026-000001, ...
    number = models.TextField(
        unique=True,
        db_default=models.Func(
            models.Value("invoice"), function="serial_nextval", output_field=models.TextField()
        ),
    )
    note = models.TextField(blank=True, default="")

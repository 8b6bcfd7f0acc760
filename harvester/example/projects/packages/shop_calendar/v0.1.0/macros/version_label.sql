{#- The version of shop_calendar this macro ships in, as a SQL string literal. -#}
{% macro version_label() -%}
    '0.1.0'
{%- endmacro %}

"""ServiceErrorMiddleware: what a person sees when a page's service refuses.

A NotFound is the 404 page (someone else's object looks exactly like a missing one), a
refusal from a view marked `errors_back_to` is flashed on the page the form was on, and
the API keeps its JSON errors.
"""

from __future__ import annotations

import re
import uuid

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client
from django.urls import include, path

from core.exceptions import NotFound, ServiceError
from core.middleware import errors_back_to
from sessions_app.models import Session
from skills_app import services as skill_services

pytestmark = pytest.mark.django_db


# Views that raise, mounted next to the real pages (see `urls` below).
@errors_back_to("team_member", args=["user_id"], anchor="quota")
def refused(request: HttpRequest, user_id: int, extra: str) -> HttpResponse:
    raise ServiceError("over_limit", "Too much, sorry.")


@errors_back_to("dashboard")
def missing(request: HttpRequest) -> HttpResponse:
    raise ServiceError("not_found", "No such file.", status=404)


def unmarked(request: HttpRequest) -> HttpResponse:
    raise ServiceError("invalid", "Nobody said where to go.")


def api_style(request: HttpRequest) -> HttpResponse:
    raise NotFound("thing")


urlpatterns = [
    path("test/refused/<int:user_id>/<str:extra>/", refused),
    path("test/missing/", missing),
    path("test/unmarked/", unmarked),
    path("api/test/not-found/", api_style),
    path("", include("hermes_site.urls")),
]


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.urls(__name__)
def test_a_refusal_is_flashed_on_the_page_the_view_names(owner):
    client = logged_in(owner)
    response = client.post("/test/refused/7/ignored/")
    # Only the URL arguments named in `args` are used; the anchor follows.
    assert response.status_code == 302 and response["Location"] == "/accounts/team/7/#quota"
    page = client.get("/").content.decode()
    assert '<li class="flash-error">Too much, sorry.</li>' in page


@pytest.mark.urls(__name__)
def test_a_service_error_with_status_404_is_the_404_page(owner):
    response = logged_in(owner).get("/test/missing/")
    assert response.status_code == 404 and "text/html" in response["Content-Type"]


@pytest.mark.urls(__name__)
def test_an_unmarked_view_lets_the_error_through_as_before(owner):
    with pytest.raises(ServiceError):
        logged_in(owner).get("/test/unmarked/")


@pytest.mark.urls(__name__)
def test_api_paths_are_left_to_the_api_error_handler(owner):
    with pytest.raises(NotFound):
        logged_in(owner).get("/api/test/not-found/")


def without_csrf(content: bytes) -> str:
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", content.decode())


def test_someone_elses_conversation_looks_exactly_like_a_missing_one(owner, outsider):
    theirs = Session.objects.create(owner=outsider, title="Private plans")
    client = logged_in(owner)
    other = client.get(f"/chat/{theirs.pk}/")
    nowhere = client.get(f"/chat/{uuid.uuid4()}/")
    assert other.status_code == nowhere.status_code == 404
    # The same page, but for the log-out form's CSRF token (masked afresh on every page).
    assert without_csrf(other.content) == without_csrf(nowhere.content)
    assert "Private plans" not in other.content.decode()
    assert client.post(f"/chat/{theirs.pk}/delete/").status_code == 404
    assert Session.objects.filter(pk=theirs.pk).exists()
    assert logged_in(outsider).get(f"/chat/{theirs.pk}/").status_code == 200


def test_someone_elses_skill_is_the_404_page(owner, outsider):
    skill_services.skill_create(
        user=outsider,
        content="---\nname: secret-recipe\ndescription: Theirs.\n---\n\n# Secret\n",
        category="",
    )
    client = logged_in(owner)
    assert client.get("/skills/secret-recipe/").status_code == 404
    assert client.post("/skills/secret-recipe/delete/").status_code == 404


def test_a_refused_account_deletion_is_flashed_in_its_section_as_before(owner):
    client = logged_in(owner)
    response = client.post("/accounts/delete/", {"password": "not the password"})
    assert response.status_code == 302 and response["Location"] == "/accounts/#delete"
    page = client.get("/accounts/").content.decode()
    assert 'class="flash-error"' in page
    owner.refresh_from_db()
    assert owner.is_active


def test_api_errors_keep_their_json_shape(owner, outsider):
    theirs = Session.objects.create(owner=outsider, title="Private plans")
    response = logged_in(owner).get(f"/api/sessions/{theirs.pk}/")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "No such conversation."}}


def test_the_asgi_handler_gives_the_same_404(owner, outsider):
    # Daphne serves the pages through Django's async handler, which runs process_exception
    # in a thread: the Http404 raised there must still become the 404 page.
    theirs = Session.objects.create(owner=outsider, title="Private plans")
    client = AsyncClient()
    client.force_login(owner)
    response = async_to_sync(client.get)(f"/chat/{theirs.pk}/")
    assert response.status_code == 404 and "text/html" in response["Content-Type"]
